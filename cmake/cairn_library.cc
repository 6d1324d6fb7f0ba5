// libcairn is made of the layers' static libraries (cmake/install.cmake);
// a shared library needs one source of its own.
namespace cairn {
const char* LibraryName() { return "cairn"; }
}  // namespace cairn
