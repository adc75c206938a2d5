// plt: calls through the PLT of a static executable, for
// scripts/kernel-acceptance.sh. glibc's string functions are IFUNCs: a
// static program calls them through .plt stubs (jmp *GOT; xchg %ax,%ax,
// bound by IRELATIVE relocations at startup), so samples land in the stub
// and in the implementation it jumps to, as well as in the caller. Built
// static with -O2 -fomit-frame-pointer -fno-builtin (so that gcc calls
// strlen, strnlen and strcpy rather than folding or inlining them).
//
// Told apart by the innermost function of a sample:
//   p2 p1 main __libc_start_call_main __libc_start_main _start
//   PLT p2 p1 main __libc_start_call_main __libc_start_main _start
//   __strlen_* p2 p1 main __libc_start_call_main __libc_start_main _start
//   __strnlen_* p2 p1 main __libc_start_call_main __libc_start_main _start
//   __strcpy_* p2 p1 main __libc_start_call_main __libc_start_main _start
// (PLT: a .plt stub, which has no symbol; the implementation is reached
// by the stub's jump, so its caller is p2.)
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile unsigned long sink;
unsigned long iterations = 20000000;
char buf[64] = "x";
char dst[64];

NOINLINE int p2(int x)
{
	unsigned long n = 0;
	for (unsigned long i = 0; i < iterations; i++) {
		__asm__ volatile("" ::: "memory"); // buf may have changed
		n += strlen(buf);
		n += strnlen(buf, i & 31);
		strcpy(dst, buf);
	}
	sink += n;
	return x + (int)n;
}

NOINLINE int p1(int x)
{
	return p2(x + 1) * 3 + 1;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		iterations = strtoul(argv[1], NULL, 0);
	return p1(argc) == 0x12345 ? 1 : 0;
}
