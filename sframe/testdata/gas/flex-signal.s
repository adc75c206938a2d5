	.text
	.globl f1
	.type f1, @function
f1:
	.cfi_startproc
	.cfi_signal_frame
	leaq 8(%rsp), %r10
	.cfi_def_cfa %r10, 0
	andq $-16, %rsp
	pushq -8(%r10)
	pushq %rbp
	movq %rsp, %rbp
	.cfi_escape 0x10,0x6,0x2,0x76,0x0
	.cfi_escape 0xf,0x3,0x76,0x78,0x6
	nop
	ret
	.cfi_endproc
	.size f1, .-f1
	.globl f2
	.type f2, @function
f2:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_val_offset rbp, -16
	nop
	.cfi_register rip, r11
	nop
	.cfi_offset rip, -24
	nop
	ret
	.cfi_endproc
	.size f2, .-f2
	.globl f3
	.type f3, @function
f3:
	.cfi_startproc
	.cfi_def_cfa rbp, 16
	.cfi_offset rbp, -16
	.cfi_signal_frame
	nop
	ret
	.cfi_endproc
