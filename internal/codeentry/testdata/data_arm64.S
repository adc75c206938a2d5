// A function with a literal pool: data inside .text, which the $d
// mapping symbol marks.
	.text
	.global	pooled
	.type	pooled, %function
	.p2align 3
pooled:
	ldr	x0, 1f
	ret
	.p2align 3
1:	.quad	0x123456789abcdef0
	.size	pooled, .-pooled
