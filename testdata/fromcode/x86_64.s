# Hand-written x86-64 functions, one per shape the code analysis of
# internal/codeflow must describe or leave out (issue 46). Each is written
# WITH its .cfi_* directives: the CFI is the reference the analysis is
# judged against (internal/testing/codecheck). build.sh assembles this
# file twice: as it is, and with every line that starts with .cfi_
# deleted (so a directive must stay on a line of its own).
#
# _start (no CFI: the outermost frame) runs each function once and exits
# with status 0 when every result is the one expected.

	.text

# leaf: never touches %rsp.
	.globl	leaf_add
	.type	leaf_add, @function
leaf_add:
	.cfi_startproc
	endbr64
	lea	(%rdi,%rsi), %rax
	ret
	.cfi_endproc
	.size	leaf_add, .-leaf_add

# constant pushes, pops and sub/add of %rsp.
	.globl	push_pop
	.type	push_pop, @function
push_pop:
	.cfi_startproc
	endbr64
	push	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	push	%r12
	.cfi_def_cfa_offset 24
	.cfi_offset r12, -24
	sub	$40, %rsp
	.cfi_def_cfa_offset 64
	mov	%rdi, %rbx
	mov	%rsi, %r12
	mov	%rbx, 8(%rsp)
	mov	%r12, 16(%rsp)
	mov	8(%rsp), %rax
	add	16(%rsp), %rax
	add	$40, %rsp
	.cfi_def_cfa_offset 24
	pop	%r12
	.cfi_def_cfa_offset 16
	pop	%rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	push_pop, .-push_pop

# frame pointer: push %rbp; mov %rsp,%rbp ... leave; a call inside.
	.globl	fp_frame
	.type	fp_frame, @function
fp_frame:
	.cfi_startproc
	endbr64
	push	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	mov	%rsp, %rbp
	.cfi_def_cfa_register rbp
	sub	$32, %rsp
	mov	%rdi, -8(%rbp)
	mov	%rsi, -16(%rbp)
	call	leaf_add
	add	-8(%rbp), %rax
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size	fp_frame, .-fp_frame

# several epilogues: remember_state/restore_state around each early return.
	.globl	multi_epilogue
	.type	multi_epilogue, @function
multi_epilogue:
	.cfi_startproc
	endbr64
	push	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	mov	%rdi, %rbx
	cmp	$1, %rdi
	jne	1f
	mov	$10, %eax
	.cfi_remember_state
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_restore_state
1:	cmp	$2, %rdi
	jne	2f
	mov	$20, %eax
	.cfi_remember_state
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_restore_state
2:	lea	30(%rbx), %rax
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_endproc
	.size	multi_epilogue, .-multi_epilogue

# shrink-wrapped: the early return comes before the prologue.
	.globl	shrink_wrap
	.type	shrink_wrap, @function
shrink_wrap:
	.cfi_startproc
	endbr64
	test	%rdi, %rdi
	jne	1f
	xor	%eax, %eax
	ret
1:	push	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	mov	%rdi, %rbx
	mov	%rdi, %rsi
	call	leaf_add
	add	%rbx, %rax
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_endproc
	.size	shrink_wrap, .-shrink_wrap

# tail call: the frame is gone before the jmp to another function.
	.globl	tail_call
	.type	tail_call, @function
tail_call:
	.cfi_startproc
	endbr64
	push	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	lea	1(%rdi), %rbx
	mov	%rbx, %rdi
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	jmp	leaf_add
	.cfi_endproc
	.size	tail_call, .-tail_call

# a call that does not return (abort through the PLT) as the last
# instruction: nothing follows it in the function.
	.globl	checked
	.type	checked, @function
checked:
	.cfi_startproc
	endbr64
	test	%rdi, %rdi
	js	1f
	mov	%rdi, %rax
	ret
1:	sub	$8, %rsp
	.cfi_def_cfa_offset 16
	call	abort@PLT
	.cfi_endproc
	.size	checked, .-checked

# a PIC jump table (lea/movslq/add/jmp *) behind its bounds check, inside
# a frame so that the jmp cannot pass for a tail call.
	.globl	jump_table
	.type	jump_table, @function
jump_table:
	.cfi_startproc
	endbr64
	push	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	mov	$100, %ebx
	cmp	$3, %rdi
	ja	.Ljt_default
	lea	.Ljt_table(%rip), %rdx
	movslq	(%rdx,%rdi,4), %rax
	add	%rdx, %rax
	jmp	*%rax
.Ljt_0:	mov	$1, %ebx
	jmp	.Ljt_default
.Ljt_1:	mov	$2, %ebx
	jmp	.Ljt_default
.Ljt_2:	mov	$3, %ebx
	jmp	.Ljt_default
.Ljt_3:	mov	$4, %ebx
.Ljt_default:
	mov	%rbx, %rax
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_endproc
	.size	jump_table, .-jump_table
	.section	.rodata
	.p2align 2
.Ljt_table:
	.long	.Ljt_0-.Ljt_table
	.long	.Ljt_1-.Ljt_table
	.long	.Ljt_2-.Ljt_table
	.long	.Ljt_3-.Ljt_table
	.text

# a jump table whose bounds check comes after it in the code, reached
# by a jump back: the walk finds the bound on the path it follows, while
# verify's straight-line check (codeflow.CheckRules) cannot (nor can the
# table's content bound it: a word past the bound points into another
# function), and counts the jump's rule as one it cannot re-derive, not
# as wrong.
	.globl	jump_table_far
	.type	jump_table_far, @function
jump_table_far:
	.cfi_startproc
	push	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	mov	$100, %ebx
	jmp	.Ljf_check
.Ljf_dispatch:
	lea	.Ljf_table(%rip), %rdx
	movslq	(%rdx,%rdi,4), %rax
	add	%rdx, %rax
	jmp	*%rax
.Ljf_0:	mov	$1, %ebx
	jmp	.Ljf_out
.Ljf_1:	mov	$2, %ebx
	jmp	.Ljf_out
.Ljf_check:
	cmp	$1, %rdi
	jbe	.Ljf_dispatch
.Ljf_out:
	mov	%rbx, %rax
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_endproc
	.size	jump_table_far, .-jump_table_far
	.section	.rodata
	.p2align 2
.Ljf_table:
	.long	.Ljf_0-.Ljf_table
	.long	.Ljf_1-.Ljf_table
	# past the bound: another function, so that the table's content
	# does not bound it either
	.long	leaf_add-.Ljf_table
	.text

# x86inc-style realignment under a frame pointer.
	.globl	realign_fp
	.type	realign_fp, @function
realign_fp:
	.cfi_startproc
	endbr64
	push	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	mov	%rsp, %rbp
	.cfi_def_cfa_register rbp
	and	$-64, %rsp
	sub	$128, %rsp
	movq	%rdi, %xmm0
	movdqa	%xmm0, (%rsp)
	movdqa	%xmm0, 64(%rsp)
	mov	64(%rsp), %rax
	mov	%rbp, %rsp
	pop	%rbp
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size	realign_fp, .-realign_fp

# realignment without a frame pointer: the old %rsp is kept in %r11 only,
# so the CFA is in a general register: the analysis must leave it out.
	.globl	realign_nofp
	.type	realign_nofp, @function
realign_nofp:
	.cfi_startproc
	endbr64
	mov	%rsp, %r11
	.cfi_def_cfa_register r11
	and	$-32, %rsp
	sub	$64, %rsp
	mov	%rdi, (%rsp)
	mov	(%rsp), %rax
	mov	%r11, %rsp
	.cfi_def_cfa_register rsp
	ret
	.cfi_endproc
	.size	realign_nofp, .-realign_nofp

# enter/leave.
	.globl	enter_leave
	.type	enter_leave, @function
enter_leave:
	.cfi_startproc
	endbr64
	enter	$32, $0
	.cfi_def_cfa rbp, 16
	.cfi_offset rbp, -16
	mov	%rdi, -8(%rbp)
	mov	-8(%rbp), %rax
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size	enter_leave, .-enter_leave

# alloca-like: a variable sub of %rsp under a frame pointer, a saved
# register restored through %rbp.
	.globl	alloca_fp
	.type	alloca_fp, @function
alloca_fp:
	.cfi_startproc
	endbr64
	push	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	mov	%rsp, %rbp
	.cfi_def_cfa_register rbp
	push	%rbx
	.cfi_offset rbx, -24
	sub	$8, %rsp
	mov	%rdi, %rbx
	lea	15(%rdi), %rax
	and	$-16, %rax
	sub	%rax, %rsp
	mov	%rbx, (%rsp)
	mov	(%rsp), %rax
	mov	-8(%rbp), %rbx
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size	alloca_fp, .-alloca_fp

# AVX-512 (EVEX) in a loop body with a frame.
	.globl	avx512_loop
	.type	avx512_loop, @function
avx512_loop:
	.cfi_startproc
	endbr64
	push	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	mov	%rsp, %rbp
	.cfi_def_cfa_register rbp
	and	$-64, %rsp
	sub	$64, %rsp
	vpbroadcastd	%edi, %zmm0
	vpxord	%zmm1, %zmm1, %zmm1
	mov	$4, %ecx
1:	vpaddd	%zmm0, %zmm1, %zmm1
	vmovdqu32	%zmm1, (%rsp)
	dec	%ecx
	jnz	1b
	mov	(%rsp), %eax
	vzeroupper
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size	avx512_loop, .-avx512_loop

# AVX2 and BMI2 between a push and a pop.
	.globl	avx2_bmi2
	.type	avx2_bmi2, @function
avx2_bmi2:
	.cfi_startproc
	endbr64
	push	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	vmovd	%edi, %xmm0
	vpbroadcastd	%xmm0, %ymm0
	vpaddd	%ymm0, %ymm0, %ymm1
	vmovd	%xmm1, %ebx
	mov	$2, %ecx
	shlx	%rcx, %rbx, %rax
	mov	$0xff, %edx
	pdep	%rdx, %rax, %rax
	rorx	$1, %rax, %rax
	vzeroupper
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_endproc
	.size	avx2_bmi2, .-avx2_bmi2

# a hot part and a .cold part elsewhere, entered by a jump with the frame
# in place (GCC's foo.cold): the cold part has its own FDE whose first
# row is the frame at the jump.
	.globl	hot
	.type	hot, @function
hot:
	.cfi_startproc
	endbr64
	push	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	mov	%rdi, %rbx
	test	%rdi, %rdi
	js	hot.cold
	lea	1(%rbx), %rax
.Lhot_out:
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_endproc
	.size	hot, .-hot

	.section	.text.unlikely,"ax",@progbits
	.type	hot.cold, @function
hot.cold:
	.cfi_startproc
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	mov	%rbx, %rax
	neg	%rax
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore rbx
	ret
	.cfi_endproc
	.size	hot.cold, .-hot.cold
	.text

# _start: no CFI (the outermost frame). Runs each function and exits 0
# when every result is right, else with the number of the first wrong.
	.globl	_start
	.type	_start, @function
_start:
	xor	%ebp, %ebp
	and	$-16, %rsp
	xor	%r15d, %r15d
.macro	expect n, fn, a, b, want
	mov	$\a, %rdi
	mov	$\b, %rsi
	call	\fn
	mov	$\n, %r15d
	cmp	$\want, %rax
	jne	.Lfail
.endm
	expect	1, leaf_add, 2, 3, 5
	expect	2, push_pop, 4, 5, 9
	expect	3, fp_frame, 6, 7, 19
	expect	4, multi_epilogue, 1, 0, 10
	expect	5, multi_epilogue, 2, 0, 20
	expect	6, multi_epilogue, 3, 0, 33
	expect	7, shrink_wrap, 0, 0, 0
	expect	8, shrink_wrap, 5, 0, 15
	expect	9, tail_call, 4, 10, 15
	expect	10, checked, 7, 0, 7
	expect	11, jump_table, 2, 0, 3
	expect	12, jump_table, 9, 0, 100
	expect	13, realign_fp, 11, 0, 11
	expect	14, realign_nofp, 12, 0, 12
	expect	15, enter_leave, 13, 0, 13
	expect	16, alloca_fp, 40, 0, 40
	expect	17, avx512_loop, 3, 0, 12
	expect	18, avx2_bmi2, 3, 0, 12
	expect	19, hot, 4, 0, 5
	expect	20, hot, -4, 0, 4
	expect	21, jump_table_far, 1, 0, 2
	expect	22, jump_table_far, 5, 0, 100
	xor	%r15d, %r15d
.Lfail:
	mov	%r15d, %edi
	mov	$60, %eax
	syscall
	.size	_start, .-_start

	.section	.note.GNU-stack,"",@progbits
