# An s390x shared-library function calling through the PLT: ld emits SFrame
# FDEs for the PLT (PLT0 and a PC-mask FDE for the entries).
	.text
	.globl	callext
	.type	callext, @function
callext:
	.cfi_startproc
	stmg	%r14,%r15,112(%r15)
	.cfi_offset 14, -48
	.cfi_offset 15, -40
	aghi	%r15,-160
	.cfi_def_cfa_offset 320
	brasl	%r14,ext_a@PLT
	brasl	%r14,ext_b@PLT
	lmg	%r14,%r15,272(%r15)
	.cfi_restore 15
	.cfi_restore 14
	.cfi_def_cfa_offset 160
	br	%r14
	.cfi_endproc
	.size	callext, .-callext
