extern "C" __global__ void add(float *a, float b) { a[threadIdx.x] += b; }
