/* The two macros libsframe's public headers take from libiberty's
   ansidecl.h (not shipped by libsframe-dev), for bench/libsframe-bench.c. */
#ifndef CFI2SFRAME_ANSIDECL_SHIM_H
#define CFI2SFRAME_ANSIDECL_SHIM_H
#define ATTRIBUTE_PACKED __attribute__((packed))
#define ATTRIBUTE_UNUSED __attribute__((unused))
#endif
