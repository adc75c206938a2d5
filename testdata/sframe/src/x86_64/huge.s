# A function over 64 KiB whose last rows start past offset 65535: SFrame FRE
# start addresses of 4 bytes. Also a function of 256..65535 bytes (2 bytes).

	.text
	.globl	huge
	.type	huge, @function
huge:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	.skip	70000, 0x90
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	huge, .-huge

	.globl	medium
	.type	medium, @function
medium:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	.skip	300, 0x90
	popq	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	medium, .-medium
