// A computed-goto interpreter (GCC's labels as values), as interpreters
// dispatch: the label table holds code addresses that a PIE relocates,
// which the start finder sees as pointers into code. Built stripped by
// TestComputedGotos: no symbol says the labels are inside run.
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long run(const unsigned char *code, long *stack) {
    static void *tbl[] = {&&op_push, &&op_add, &&op_mul, &&op_dup, &&op_print, &&op_halt, &&op_sub, &&op_jnz};
    long acc = 0, sp = 0;
    char big[700];
    big[code[0]] = 1;
    unsigned char op;
#define NEXT do { op = *code++; goto *tbl[op]; } while (0)
    NEXT;
op_push: stack[sp++] = *code++; NEXT;
op_add: sp--; stack[sp-1] += stack[sp]; NEXT;
op_mul: sp--; stack[sp-1] *= stack[sp]; NEXT;
op_dup: stack[sp] = stack[sp-1]; sp++; NEXT;
op_print: printf("%ld\n", stack[sp-1]); acc += big[stack[sp-1] & 511]; NEXT;
op_sub: sp--; stack[sp-1] -= stack[sp]; NEXT;
op_jnz: if (stack[--sp]) code -= *code; else code++; NEXT;
op_halt: return stack[sp-1] + acc;
}
int main(int argc, char **argv) {
    unsigned char prog[] = {0, 5, 0, 3, 1, 3, 2, 4, 5};
    long st[64];
    return (int)run(prog, st) & 1;
}
