/* Input for libsframecheck's test: calls through the PLT (PCMASK FDEs on
   x86-64), a realigned frame with a variable-length array (DRAP on x86-64
   with -mstackrealign: flexible FDEs in V3), and two signal trampolines
   marked with .cfi_signal_frame: one whose CFA is a register plus offset
   (a signal FDE with rows), one whose CFA is a DWARF expression, as
   glibc's __restore_rt (a signal FDE without rows under --signal-frames).
   On s390x, built with -fno-omit-frame-pointer, leaves keep the frame
   pointer in a floating-point register (flexible FDEs in V3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
__asm__(".text\n"
	".globl tramp_rows\n.type tramp_rows,@function\ntramp_rows:\n"
	".cfi_startproc\n.cfi_signal_frame\n"
	"\tnop\n\tsub $8, %rsp\n.cfi_adjust_cfa_offset 8\n\tadd $8, %rsp\n.cfi_adjust_cfa_offset -8\n\tret\n"
	".cfi_endproc\n.size tramp_rows,.-tramp_rows\n"
	".globl tramp_expr\n.type tramp_expr,@function\ntramp_expr:\n"
	".cfi_startproc simple\n.cfi_signal_frame\n"
	/* DW_CFA_def_cfa_expression: DW_OP_breg7 (rsp) 160, DW_OP_deref */
	".cfi_escape 0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06\n"
	"\tnop\n\tmov $15, %rax\n\tsyscall\n"
	".cfi_endproc\n.size tramp_expr,.-tramp_expr\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl tramp_rows\n.type tramp_rows,%function\ntramp_rows:\n"
	".cfi_startproc\n.cfi_signal_frame\n"
	"\tnop\n\tsub sp, sp, #16\n.cfi_adjust_cfa_offset 16\n\tadd sp, sp, #16\n.cfi_adjust_cfa_offset -16\n\tret\n"
	".cfi_endproc\n.size tramp_rows,.-tramp_rows\n"
	".globl tramp_expr\n.type tramp_expr,%function\ntramp_expr:\n"
	".cfi_startproc simple\n.cfi_signal_frame\n"
	/* DW_CFA_def_cfa_expression: DW_OP_breg31 (sp) 304, DW_OP_deref */
	".cfi_escape 0x0f, 0x04, 0x8f, 0xb0, 0x02, 0x06\n"
	"\tnop\n\tmov x8, #139\n\tsvc #0\n"
	".cfi_endproc\n.size tramp_expr,.-tramp_expr\n");
#elif defined(__s390x__)
__asm__(".text\n"
	".globl tramp_rows\n.type tramp_rows,@function\ntramp_rows:\n"
	".cfi_startproc\n.cfi_signal_frame\n"
	"\tnopr\n\taghi %r15,-160\n.cfi_adjust_cfa_offset 160\n\taghi %r15,160\n.cfi_adjust_cfa_offset -160\n\tbr %r14\n"
	".cfi_endproc\n.size tramp_rows,.-tramp_rows\n"
	".globl tramp_expr\n.type tramp_expr,@function\ntramp_expr:\n"
	".cfi_startproc simple\n.cfi_signal_frame\n"
	/* DW_CFA_def_cfa_expression: DW_OP_breg15 (r15) 376, DW_OP_deref */
	".cfi_escape 0x0f, 0x04, 0x7f, 0xf8, 0x02, 0x06\n"
	"\tnopr\n\tsvc 173\n"
	".cfi_endproc\n.size tramp_expr,.-tramp_expr\n");
#endif

__attribute__((noinline)) static long fill(char *p, long n)
{
	long s = 0;
	for (long i = 0; i < n; i++) {
		p[i] = (char)(i * 7);
		s += p[i];
	}
	return s;
}

__attribute__((noinline, force_align_arg_pointer)) long realigned(long n)
{
	char vla[n + 1];
	double v[4] __attribute__((aligned(32)));
	memset(v, 0, sizeof v);
	v[n & 3] = (double)n;
	return fill(vla, n) + (long)v[n & 3];
}

__attribute__((noinline)) long deep(int d)
{
	if (d == 0)
		return realigned(getenv("N") ? atoi(getenv("N")) : 5);
	char *b = malloc(16 + d);
	long r = deep(d - 1) + (long)strlen(strcpy(b, "depth"));
	free(b);
	return r;
}

int main(int argc, char **argv)
{
	(void)argv;
	printf("%ld\n", deep(argc + 3));
	puts(strerror(argc));
	return 0;
}
