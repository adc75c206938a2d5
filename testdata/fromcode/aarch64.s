// Hand-written AArch64 functions, one per shape the code analysis of
// internal/codeflow must describe or leave out (issue 46). Each is written
// WITH its .cfi_* directives: the CFI is the reference the analysis is
// judged against (internal/testing/codecheck). build.sh assembles this
// file twice: as it is, and with every line that starts with .cfi_
// deleted (so a directive must stay on a line of its own).
//
// _start (no CFI: the outermost frame) runs each function once and exits
// with status 0 when every result is the one expected.

	.arch	armv8.3-a
	.text

// leaf: never touches sp, the return address stays in x30.
	.globl	a_leaf
	.type	a_leaf, %function
a_leaf:
	.cfi_startproc
	add	x0, x0, x1
	ret
	.cfi_endproc
	.size	a_leaf, .-a_leaf

// frame record: stp x29,x30,[sp,#-N]!; mov x29,sp; a callee-saved x19.
	.globl	a_frame
	.type	a_frame, %function
a_frame:
	.cfi_startproc
	stp	x29, x30, [sp, #-32]!
	.cfi_def_cfa_offset 32
	.cfi_offset 29, -32
	.cfi_offset 30, -24
	mov	x29, sp
	.cfi_def_cfa_register 29
	str	x19, [sp, #16]
	.cfi_offset 19, -16
	mov	x19, x0
	bl	a_leaf
	add	x0, x0, x19
	ldr	x19, [sp, #16]
	.cfi_restore 19
	ldp	x29, x30, [sp], #32
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa 31, 0
	ret
	.cfi_endproc
	.size	a_frame, .-a_frame

// only the return address saved: str x30,[sp,#-16]!.
	.globl	a_strlr
	.type	a_strlr, %function
a_strlr:
	.cfi_startproc
	str	x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 30, -16
	bl	a_leaf
	ldr	x30, [sp], #16
	.cfi_restore 30
	.cfi_def_cfa_offset 0
	ret
	.cfi_endproc
	.size	a_strlr, .-a_strlr

// return address signed with the A key: paciasp ... autiasp.
	.globl	a_pac
	.type	a_pac, %function
a_pac:
	.cfi_startproc
	paciasp
	.cfi_negate_ra_state
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	mov	x29, sp
	bl	a_leaf
	ldp	x29, x30, [sp], #16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	autiasp
	.cfi_negate_ra_state
	ret
	.cfi_endproc
	.size	a_pac, .-a_pac

// signed with the B key: pacibsp ... autibsp, the CIE marked 'B'.
	.globl	a_pacb
	.type	a_pacb, %function
a_pacb:
	.cfi_startproc
	.cfi_b_key_frame
	pacibsp
	.cfi_negate_ra_state
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	mov	x29, sp
	bl	a_leaf
	ldp	x29, x30, [sp], #16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	autibsp
	.cfi_negate_ra_state
	ret
	.cfi_endproc
	.size	a_pacb, .-a_pacb

// signed, and authenticated by the return itself: retaa.
	.globl	a_retaa
	.type	a_retaa, %function
a_retaa:
	.cfi_startproc
	paciasp
	.cfi_negate_ra_state
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	mov	x29, sp
	bl	a_leaf
	ldp	x29, x30, [sp], #16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	retaa
	.cfi_endproc
	.size	a_retaa, .-a_retaa

// tail call: the frame is gone before the b to another function.
	.globl	a_tail
	.type	a_tail, %function
a_tail:
	.cfi_startproc
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	mov	x29, sp
	bl	a_leaf
	mov	x1, #1
	ldp	x29, x30, [sp], #16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	b	a_leaf
	.cfi_endproc
	.size	a_tail, .-a_tail

// a jump table (adr/ldrb/add/br) behind its bounds check, inside a frame
// so that the br cannot pass for a tail call.
	.globl	a_jtab
	.type	a_jtab, %function
a_jtab:
	.cfi_startproc
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	mov	x29, sp
	mov	x4, #100
	cmp	w0, #3
	b.hi	.Laj_out
	adr	x1, .Laj_table
	ldrb	w2, [x1, w0, uxtw]
	adr	x3, .Laj_0
	add	x2, x3, w2, sxtb #2
	br	x2
.Laj_0:	mov	x4, #1
	b	.Laj_out
.Laj_1:	mov	x4, #2
	b	.Laj_out
.Laj_2:	mov	x4, #3
	b	.Laj_out
.Laj_3:	mov	x4, #4
.Laj_out:
	mov	x0, x4
	ldp	x29, x30, [sp], #16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	ret
	.cfi_endproc
	.size	a_jtab, .-a_jtab
	.section	.rodata
.Laj_table:
	.byte	(.Laj_0 - .Laj_0) / 4
	.byte	(.Laj_1 - .Laj_0) / 4
	.byte	(.Laj_2 - .Laj_0) / 4
	.byte	(.Laj_3 - .Laj_0) / 4
	.text

// a call that does not return (abort through the PLT) as the last
// instruction.
	.globl	a_noret
	.type	a_noret, %function
a_noret:
	.cfi_startproc
	cmp	x0, #0
	b.lt	1f
	ret
1:	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	mov	x29, sp
	bl	abort
	.cfi_endproc
	.size	a_noret, .-a_noret

// _start: no CFI (the outermost frame).
	.globl	_start
	.type	_start, %function
_start:
	mov	x29, #0
	mov	x30, #0
	.macro	expect n, fn, a, b, want
	mov	x0, #\a
	mov	x1, #\b
	bl	\fn
	mov	x20, #\n
	cmp	x0, #\want
	b.ne	.Lfail
	.endm
	expect	1, a_leaf, 2, 3, 5
	expect	2, a_frame, 4, 5, 13
	expect	3, a_strlr, 6, 7, 13
	expect	4, a_pac, 1, 2, 3
	expect	5, a_pacb, 3, 4, 7
	expect	6, a_retaa, 5, 6, 11
	expect	7, a_tail, 7, 8, 16
	expect	8, a_jtab, 2, 0, 3
	expect	9, a_jtab, 9, 0, 100
	expect	10, a_noret, 9, 0, 9
	mov	x20, #0
.Lfail:
	mov	x0, x20
	mov	x8, #93
	svc	#0
	.size	_start, .-_start

	.section	.note.GNU-stack,"",@progbits
