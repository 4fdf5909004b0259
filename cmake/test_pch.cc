// The translation unit of vm_test_pch (CMakeLists.txt): the target exists to build the test
// executables' precompiled header, which each of them reuses; this file adds nothing to it.
