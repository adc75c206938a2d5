# Two functions of 16 bytes each, and CFI for the first only: the CFI's
# functions convert in full, and the code is half covered.
	.text
	.globl _start
	.type _start, @function
_start:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	mov %rsp, %rbp
	call nocfi
	mov $60, %eax
	xor %edi, %edi
	syscall
	.cfi_endproc
	.size _start, .-_start
	.p2align 4
	.type nocfi, @function
nocfi:
	nop
	nop
	ret
	.p2align 4, 0x90
	.size nocfi, .-nocfi
