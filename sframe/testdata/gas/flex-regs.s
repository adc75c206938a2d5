	.text
	.globl f2
	.type f2, @function
f2:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	nop
	.cfi_register rip, r11
	nop
	.cfi_offset rip, -24
	nop
	.cfi_register rbp, r12
	nop
	.cfi_def_cfa r13, 8
	nop
	ret
	.cfi_endproc
	.size f2, .-f2
