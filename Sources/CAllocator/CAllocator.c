#include "CAllocator.h"
#include <malloc.h>

int callocator_trim(size_t pad) { return malloc_trim(pad); }
