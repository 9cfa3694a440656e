// The version of the wizq library: the numbers a program was compiled
// against (macros) and the version of the library it runs with (Version()).
//
// The macros follow project(wizq VERSION ...) in CMakeLists.txt; configuring
// the build fails if the two disagree. A program built against one version
// and run with another shared library of the same SONAME can compare
// WIZQ_VERSION_* with wizq::Version() (docs/INSTALL.md, "Versioning").
#ifndef WIZQ_VERSION_H_
#define WIZQ_VERSION_H_

#define WIZQ_VERSION_MAJOR 0
#define WIZQ_VERSION_MINOR 1
#define WIZQ_VERSION_PATCH 0

namespace wizq {

// The version of the linked library, "MAJOR.MINOR.PATCH" (e.g. "0.1.0").
// Never null; the string is static and lives as long as the program.
// Thread-safe.
const char* Version();

}  // namespace wizq

#endif  // WIZQ_VERSION_H_
