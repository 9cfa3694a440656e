// wizq::Version() (include/wizq/version.h): the version this library was
// compiled as, from the same macros a program sees in the header.
#include "wizq/version.h"

#define WIZQ_STR_(x) #x
#define WIZQ_STR(x) WIZQ_STR_(x)

namespace wizq {

const char* Version() {
  return WIZQ_STR(WIZQ_VERSION_MAJOR) "." WIZQ_STR(
      WIZQ_VERSION_MINOR) "." WIZQ_STR(WIZQ_VERSION_PATCH);
}

}  // namespace wizq
