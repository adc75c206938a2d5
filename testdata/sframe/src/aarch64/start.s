// Hand-written AArch64 code whose call-frame information GCC does not emit
// for these fixtures. Assembled little-endian and, with -EB, big-endian.

	.text
// The process entry: the return address is undefined (outermost frame).
	.globl	_start
	.type	_start, %function
_start:
	.cfi_startproc
	.cfi_undefined x30
	mov	x29, #0
	ldr	x0, [sp]
	bl	entry
	brk	#0
	.cfi_endproc
	.size	_start, .-_start

// Return address signed with key A around the frame, stack pointer as CFA.
	.globl	pac_frame
	.type	pac_frame, %function
pac_frame:
	.cfi_startproc
	hint	#25		// paciasp
	.cfi_negate_ra_state
	stp	x29, x30, [sp, #-32]!
	.cfi_def_cfa_offset 32
	.cfi_offset 29, -32
	.cfi_offset 30, -24
	mov	x29, sp
	bl	entry
	ldp	x29, x30, [sp], #32
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	hint	#29		// autiasp
	.cfi_negate_ra_state
	ret
	.cfi_endproc
	.size	pac_frame, .-pac_frame

// A signal trampoline: CFA = sp + 4688, RA and FP saved in the frame.
	.globl	sigtramp
	.type	sigtramp, %function
	nop
sigtramp:
	.cfi_startproc simple
	.cfi_signal_frame
	.cfi_def_cfa sp, 4688
	.cfi_offset x29, -16
	.cfi_offset x30, -8
	mov	x8, #139
	svc	#0
	.cfi_endproc
	.size	sigtramp, .-sigtramp
