// The translation unit that owns cmake/PrecompiledHeaders.h's precompiled
// header (FAPrecompiledHeaders in the top-level CMakeLists.txt).
