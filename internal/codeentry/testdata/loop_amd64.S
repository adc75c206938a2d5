// A rotated loop whose head follows a jump and alignment padding, as a
// function after a tail call would: only the branch back to it says it
// is not a function. And a cold-style block after a noreturn call,
// reached only by a conditional jump.
	.text
	.globl	_start
	.type	_start, @function
_start:
	call	rotated
	call	splitfn
	mov	$60, %eax
	xor	%edi, %edi
	syscall
	hlt
	.size	_start, .-_start

	.type	rotated, @function
	.p2align 4
rotated:
	xor	%eax, %eax
	mov	$10, %ecx
	jmp	loop_cond
	.p2align 4
loop_head:
	add	%ecx, %eax
loop_cond:
	dec	%ecx
	jne	loop_head
	ret
	.size	rotated, .-rotated

	.type	splitfn, @function
	.p2align 4
splitfn:
	push	%rbx
	test	%edi, %edi
	js	cold_part
	pop	%rbx
	ret
	.size	splitfn, .-splitfn
	.p2align 4
cold_part:
	mov	$1, %edi
	call	rotated
	pop	%rbx
	ret
