/* The exported dlsym. glibc's dlsym resolves RTLD_NEXT and RTLD_DEFAULT relative to its caller, found
 * from its return address; a C wrapper that calls it would make liboomtrace the caller. So this stub
 * jumps (never calls) to the real dlsym for those two handles, leaving the caller's return address in
 * place. Lookups on a real handle go to ot_dlsym_handle (lib/route.c), which may route driver
 * functions to their wrappers. */
    .text
    .globl dlsym
    .type dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    test %rdi, %rdi                 /* RTLD_DEFAULT is 0 */
    je 1f
    cmp $-1, %rdi                   /* RTLD_NEXT is -1 */
    je 1f
    jmp ot_dlsym_handle
1:
    mov ot_real_dlsym(%rip), %rax
    test %rax, %rax
    je 2f
    jmp *%rax
2:
    /* First use: find the real dlsym, keeping the arguments. */
    push %rdi
    .cfi_adjust_cfa_offset 8
    push %rsi
    .cfi_adjust_cfa_offset 8
    sub $8, %rsp
    .cfi_adjust_cfa_offset 8
    call ot_resolve_real_dlsym
    add $8, %rsp
    .cfi_adjust_cfa_offset -8
    pop %rsi
    .cfi_adjust_cfa_offset -8
    pop %rdi
    .cfi_adjust_cfa_offset -8
    test %rax, %rax
    je 3f
    jmp *%rax
3:
    xor %eax, %eax
    ret
    .cfi_endproc
    .size dlsym, .-dlsym

    .section .note.GNU-stack,"",@progbits
