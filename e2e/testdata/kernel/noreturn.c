// noreturn: two callers whose last instruction is a call of a noreturn
// function that spins, for scripts/kernel-acceptance.sh (docs/acceptance.md,
// limit 4: the kernel looks a caller's return address up as it is, not
// minus one, so the return address of such a call is looked up at the
// caller's end). Built static with -O2 -fomit-frame-pointer.
//
//   pad_caller ends with its call of spin_pad and is followed by alignment
//   padding (no function covers the return address; cfi2sframe extends
//   its FDE by one byte there);
//   next_caller ends with its call of spin_next and is followed directly,
//   with no padding, by after_next (aligned to 1 byte), whose rule at its
//   entry (CFA rsp+8) is not next_caller's (a frame of its own): the
//   kernel unwinds next_caller's frame with after_next's rule.
// The script checks both layouts with objdump.
//
// Each spinning function gets back to main with longjmp when its loop is
// done, so one run samples both. True chains, innermost first:
//   spin_pad pad_caller pa1 main __libc_start_call_main __libc_start_main _start
//   spin_next next_caller na1 main __libc_start_call_main __libc_start_main _start
#include <setjmp.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile unsigned long sink;
unsigned long iterations = 200000000;
static jmp_buf back;

NOINLINE __attribute__((noreturn)) void spin_pad(int x)
{
	for (unsigned long i = 0; i < iterations; i++)
		sink += i;
	longjmp(back, x | 1);
}

NOINLINE __attribute__((noreturn)) void spin_next(int x)
{
	for (unsigned long i = 0; i < iterations; i++)
		sink += i;
	longjmp(back, x | 1);
}

// noipa: its callers do not learn that it never returns, so they keep
// their own frames and work after the call.
__attribute__((noipa)) void pad_caller(int x)
{
	volatile char buf[64]; // a frame of its own: CFA rsp+80 at the call
	buf[x & 63] = (char)x;
	spin_pad(buf[x & 63] + buf[1]);
}

__attribute__((noipa)) void next_caller(int x)
{
	volatile char buf[64];
	buf[x & 63] = (char)x;
	spin_next(buf[x & 63] + buf[1]);
}

// Right after next_caller, not aligned: next_caller's return address is
// its first byte.
__attribute__((noipa, optimize("align-functions=1"))) int after_next(int x)
{
	return x * 7 + 1;
}

NOINLINE int pa1(int x)
{
	pad_caller(x);
	sink += x;
	return x + 1;
}

NOINLINE int na1(int x)
{
	next_caller(x);
	sink += x;
	return x + 1;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		iterations = strtoul(argv[1], NULL, 0);
	volatile int phase = 0;
	if (setjmp(back) == 0) {
		phase = 1;
		pa1(argc);
	}
	if (phase == 1 && setjmp(back) == 0) {
		phase = 2;
		na1(argc);
	}
	return after_next(phase) == 15 ? 0 : 1;
}
