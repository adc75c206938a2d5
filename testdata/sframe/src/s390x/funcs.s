# Hand-written s390x functions (s390x's SFrame scales CFA offsets by 8 and
# tracks FP/RA saved in floating-point registers). The CFA starts at
# %r15+160.

	.text
# A non-leaf: saves %r6-%r15 in the caller's register save area, then
# allocates a 160-byte frame.
	.globl	nonleaf
	.type	nonleaf, @function
nonleaf:
	.cfi_startproc
	stmg	%r6,%r15,48(%r15)
	.cfi_offset 6, -112
	.cfi_offset 7, -104
	.cfi_offset 8, -96
	.cfi_offset 9, -88
	.cfi_offset 10, -80
	.cfi_offset 11, -72
	.cfi_offset 12, -64
	.cfi_offset 13, -56
	.cfi_offset 14, -48
	.cfi_offset 15, -40
	aghi	%r15,-160
	.cfi_def_cfa_offset 320
	brasl	%r14,nonleaf
	lmg	%r6,%r15,208(%r15)
	.cfi_restore 15
	.cfi_restore 14
	.cfi_restore 13
	.cfi_restore 12
	.cfi_restore 11
	.cfi_restore 10
	.cfi_restore 9
	.cfi_restore 8
	.cfi_restore 7
	.cfi_restore 6
	.cfi_def_cfa_offset 160
	br	%r14
	.cfi_endproc
	.size	nonleaf, .-nonleaf

# A frame-pointer function: %r11 becomes the CFA base register.
	.globl	withfp
	.type	withfp, @function
withfp:
	.cfi_startproc
	stmg	%r11,%r15,88(%r15)
	.cfi_offset 11, -72
	.cfi_offset 14, -48
	.cfi_offset 15, -40
	lgr	%r1,%r15
	aghi	%r15,-4096
	.cfi_def_cfa_offset 4256
	stg	%r1,0(%r15)
	lgr	%r11,%r15
	.cfi_def_cfa_register 11
	brasl	%r14,nonleaf
	lmg	%r11,%r15,4184(%r11)
	.cfi_restore 15
	.cfi_restore 14
	.cfi_restore 11
	.cfi_def_cfa 15, 160
	br	%r14
	.cfi_endproc
	.size	withfp, .-withfp

# A leaf that keeps the return address and the frame pointer in
# floating-point registers instead of on the stack.
	.globl	fprsave
	.type	fprsave, @function
fprsave:
	.cfi_startproc
	ldgr	%f0,%r14
	.cfi_register 14, 16
	ldgr	%f2,%r11
	.cfi_register 11, 17
	aghi	%r15,-160
	.cfi_def_cfa_offset 320
	lgr	%r11,%r15
	aghi	%r15,160
	.cfi_def_cfa_offset 160
	lgdr	%r11,%f2
	.cfi_restore 11
	lgdr	%r14,%f0
	.cfi_restore 14
	br	%r14
	.cfi_endproc
	.size	fprsave, .-fprsave
