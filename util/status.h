// Status (include/wizq/status.h, public) and the macro the library uses
// with it. See the public header for the contract.
#ifndef WIZQ_UTIL_STATUS_H_
#define WIZQ_UTIL_STATUS_H_

#include "wizq/status.h"

namespace wizq {

#define WIZQ_RETURN_IF_ERROR(expr) \
  do {                             \
    ::wizq::Status _st = (expr);   \
    if (!_st.ok()) return _st;     \
  } while (0)

}  // namespace wizq

#endif  // WIZQ_UTIL_STATUS_H_
