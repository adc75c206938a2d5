// dyn: a dynamically linked program whose call chains run through its own
// shared library (libchain.c) and libc, for scripts/kernel-acceptance.sh.
// Built (PIE) with -O2 -fomit-frame-pointer against libchain.so; the guest
// runs it with its own ld.so and libc.so.6 (converted or not, per variant).
// The kernel registers the program's and ld.so's .sframe at exec; the
// libraries' only through sframe_register(), which the preloaded
// sfreg.c calls (without it their frames are walked by the frame pointer:
// docs/acceptance.md, limit 5).
//
// The true chains, innermost first ("@libc.so.6+": one or more frames in
// libc.so.6, whose internal functions have no symbol in Debian's stripped
// libc and whose merge sort recurses to a depth that varies):
//   lib_leaf lib_l2 p2 lib_l1 p1 main @libc.so.6+ _start
//   lib_cmp @libc.so.6+ lib_sort p3 main @libc.so.6+ _start
// (main's callers are __libc_start_call_main and __libc_start_main in
// libc.so.6.)
#include <stddef.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

void lib_leaf(unsigned long n);
int lib_l2(int x, unsigned long n);
int lib_l1(int x, int (*back)(int));
long lib_sort(long *v, size_t n, unsigned long spin);

volatile unsigned long sink;
unsigned long iterations = 300000000;
unsigned long spin = 800000;

NOINLINE int p2(int x)
{
	int r = lib_l2(x + 2, iterations);
	sink += (unsigned long)r;
	return r - 1;
}

NOINLINE int p1(int x)
{
	volatile char small[40];
	small[0] = (char)x;
	int r = lib_l1(x + 1, p2);
	return r + small[0];
}

NOINLINE long p3(int x)
{
	long v[64];
	unsigned long s = 88172645463325252ul + (unsigned long)x;
	for (int i = 0; i < 64; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		v[i] = (long)(s >> 8);
	}
	long r = lib_sort(v, 64, spin);
	sink += (unsigned long)r;
	return r + v[5];
}

int main(int argc, char **argv)
{
	if (argc > 1)
		iterations = strtoul(argv[1], NULL, 0);
	if (argc > 2)
		spin = strtoul(argv[2], NULL, 0);
	int a = p1(argc);
	long b = p3(argc);
	return a + b == 0x12345 ? 1 : 0;
}
