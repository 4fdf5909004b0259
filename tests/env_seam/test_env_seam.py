"""The check that volumemanager/ makes no file, directory, mount or clock call outside its Env."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_env_seam  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_core_makes_every_such_call_through_its_env():
    assert check_env_seam.findings(ROOT) == []


def plant(tmp_path, name, text):
    path = tmp_path / "volumemanager" / "disk" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return check_env_seam.findings(tmp_path)


def test_a_raw_call_is_found_with_its_file_and_line(tmp_path):
    found = plant(tmp_path, "x.cc", "int f(int d) {\n  return ::unlinkat(d, \"a\", 0);\n}\n"
                                    "void g() { mount(\"a\", \"b\", \"tmpfs\", 0, nullptr); }\n"
                                    "auto t = std::chrono::steady_clock::now();\n")
    assert found == ["volumemanager/disk/x.cc:2: unlinkat()", "volumemanager/disk/x.cc:4: mount()",
                     "volumemanager/disk/x.cc:5: steady_clock::now"]


def test_calls_through_the_env_comments_strings_and_tests_are_not(tmp_path):
    assert plant(tmp_path, "y.cc", "// ::openat(d) in a comment\n"
                                   "/* read(fd) */ const char* s = \"write(fd)\";\n"
                                   "int n = env.Read(fd, b, 1) + env_->OpenAt(d, p, 0, 0);\n"
                                   "ssize_t Read(int fd, void* b, size_t n) override;\n") == []
    assert plant(tmp_path, "z_test.cc", "int f() { return ::openat(0, \"a\", 0); }\n") == []
