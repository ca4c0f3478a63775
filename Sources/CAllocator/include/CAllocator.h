// glibc's malloc_trim(3) for Swift, whose Glibc module does not import <malloc.h>.
#ifndef CALLOCATOR_H
#define CALLOCATOR_H

#include <stddef.h>

/// Returns the allocator's free memory to the system, keeping `pad` bytes at the top of
/// the heap; 1 if it released any.
int callocator_trim(size_t pad);

#endif
