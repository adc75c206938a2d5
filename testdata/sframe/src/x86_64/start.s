# Hand-written x86-64 code whose call-frame information GCC does not emit.

	.text
# The process entry: the return address is undefined (outermost frame).
	.globl	_start
	.type	_start, @function
_start:
	.cfi_startproc
	.cfi_undefined rip
	xorl	%ebp, %ebp
	movq	(%rsp), %rdi
	andq	$-16, %rsp
	call	entry
	hlt
	.cfi_endproc
	.size	_start, .-_start

# A signal trampoline with a plain CFA: CFA = rsp + 160, RA saved at CFA-8.
	.globl	sigtramp_simple
	.type	sigtramp_simple, @function
	nop
sigtramp_simple:
	.cfi_startproc simple
	.cfi_signal_frame
	.cfi_def_cfa rsp, 160
	.cfi_offset rip, -8
	.cfi_offset rbp, -16
	movq	$15, %rax
	syscall
	.cfi_endproc
	.size	sigtramp_simple, .-sigtramp_simple

# A signal trampoline in glibc's style (__restore_rt): the CFA and every
# register are DWARF expressions over the ucontext that %rsp points to.
	.globl	sigtramp_expr
	.type	sigtramp_expr, @function
	nop
sigtramp_expr:
	.cfi_startproc simple
	.cfi_signal_frame
	# DW_CFA_def_cfa_expression: DW_OP_breg7 (rsp) 160; DW_OP_deref
	.cfi_escape 0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06
	# DW_CFA_expression rbp: DW_OP_breg7 120
	.cfi_escape 0x10, 0x06, 0x02, 0x77, 0x78
	# DW_CFA_expression rip: DW_OP_breg7 168
	.cfi_escape 0x10, 0x10, 0x03, 0x77, 0xa8, 0x01
	movq	$15, %rax
	syscall
	.cfi_endproc
	.size	sigtramp_expr, .-sigtramp_expr

# Frame pointer kept, CFA moved to rbp, then back; the RA stays at CFA-8.
	.globl	fp_frame
	.type	fp_frame, @function
fp_frame:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register rbp
	subq	$40000, %rsp
	call	entry
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size	fp_frame, .-fp_frame
