# Hand-written x86-64 loops without .cfi_* directives, the shapes of
# codec and BLAS kernels: one realigns its stack under a frame pointer
# (x86inc's way), one keeps constant pushes, one never touches rsp.
	.text
	.globl	asm_realign
	.type	asm_realign, @function
# long asm_realign(long n): sums i*3 over a 64-byte aligned buffer
asm_realign:
	push	%rbp
	mov	%rsp, %rbp
	and	$-64, %rsp
	sub	$128, %rsp
	xor	%eax, %eax
	xor	%ecx, %ecx
1:	mov	%rcx, (%rsp)
	lea	(%rcx,%rcx,2), %rdx
	add	%rdx, %rax
	mov	(%rsp), %rdx
	add	%rdx, %rax
	inc	%rcx
	cmp	%rdi, %rcx
	jl	1b
	mov	%rbp, %rsp
	pop	%rbp
	ret
	.size	asm_realign, .-asm_realign

	.globl	asm_pushes
	.type	asm_pushes, @function
# long asm_pushes(long n): calls asm_leaf n times with saved registers
asm_pushes:
	push	%rbx
	push	%r12
	sub	$8, %rsp
	mov	%rdi, %rbx
	xor	%r12d, %r12d
2:	test	%rbx, %rbx
	jz	3f
	mov	%rbx, %rdi
	call	asm_leaf
	add	%rax, %r12
	dec	%rbx
	jmp	2b
3:	mov	%r12, %rax
	add	$8, %rsp
	pop	%r12
	pop	%rbx
	ret
	.size	asm_pushes, .-asm_pushes

	.globl	asm_leaf
	.type	asm_leaf, @function
# long asm_leaf(long x): a short loop that never touches rsp
asm_leaf:
	mov	%rdi, %rax
	mov	$200, %ecx
4:	imul	$3, %rax, %rax
	xor	%rcx, %rax
	dec	%ecx
	jnz	4b
	ret
	.size	asm_leaf, .-asm_leaf
	.section	.note.GNU-stack,"",@progbits
