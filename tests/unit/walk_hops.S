/* Frames for tests/unit/test_walk.c, each calling next(arg) (rdi, rsi) from a frame of one shape:
 *   walk_hop_expr   the CFA as an expression, rbp + 16 (DW_CFA_def_cfa_expression)
 *   walk_hop_drap   a realigned frame as GCC writes it: CFA = *(rbp - 8), rbp saved at rbp + 0
 *   walk_hop_nocfi  no unwind information at all
 *   walk_hop_scratch  rbp saved at CFA - 16 and then used as a scratch register (a constant), as code
 *                   without frame pointers may: the frames inside start with that constant in rbp, and
 *                   the caller's rbp is found only in the slot */
    .text
    .globl walk_hop_expr
    .type walk_hop_expr, @function
    .p2align 4
walk_hop_expr:
    .cfi_startproc
    push %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    mov %rsp, %rbp
    .cfi_escape 0x0f, 0x02, 0x76, 0x10
    mov %rdi, %rax
    mov %rsi, %rdi
    call *%rax
    nop
    pop %rbp
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
    .size walk_hop_expr, .-walk_hop_expr

    .globl walk_hop_drap
    .type walk_hop_drap, @function
    .p2align 4
walk_hop_drap:
    .cfi_startproc
    lea 8(%rsp), %r10
    .cfi_def_cfa %r10, 0
    and $-32, %rsp
    pushq -8(%r10)
    push %rbp
    mov %rsp, %rbp
    .cfi_escape 0x10, 0x06, 0x02, 0x76, 0x00
    push %r10
    .cfi_escape 0x0f, 0x03, 0x76, 0x78, 0x06
    sub $8, %rsp
    mov %rdi, %rax
    mov %rsi, %rdi
    call *%rax
    nop
    add $8, %rsp
    pop %r10
    .cfi_def_cfa %r10, 0
    pop %rbp
    .cfi_same_value %rbp
    lea -8(%r10), %rsp
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
    .size walk_hop_drap, .-walk_hop_drap

    .globl walk_hop_nocfi
    .type walk_hop_nocfi, @function
    .p2align 4
walk_hop_nocfi:
    sub $8, %rsp
    mov %rdi, %rax
    mov %rsi, %rdi
    call *%rax
    nop
    add $8, %rsp
    ret
    .size walk_hop_nocfi, .-walk_hop_nocfi

    .globl walk_hop_scratch
    .type walk_hop_scratch, @function
    .p2align 4
walk_hop_scratch:
    .cfi_startproc
    push %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    mov $0x5eed, %ebp
    mov %rdi, %rax
    mov %rsi, %rdi
    call *%rax
    nop
    pop %rbp
    .cfi_def_cfa_offset 8
    ret
    .cfi_endproc
    .size walk_hop_scratch, .-walk_hop_scratch

    .section .note.GNU-stack,"",@progbits
