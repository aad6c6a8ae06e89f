"""Regenerate the committed *_pb2*.py modules from hedgefs.proto (`make proto`).

grpc_tools writes `import hedgefs_pb2`, which only works with proto/ on sys.path; we rewrite it
to a package import so the modules live inside hedgefs.proto.
"""

import pathlib
import sys
import tempfile

PROTO_DIR = pathlib.Path(__file__).resolve().parent
GENERATED = ("hedgefs_pb2.py", "hedgefs_pb2.pyi", "hedgefs_pb2_grpc.py")


def generate(out_dir: pathlib.Path) -> None:
    from grpc_tools import protoc

    argv = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        str(PROTO_DIR / "hedgefs.proto"),
    ]
    if protoc.main(argv) != 0:
        raise SystemExit("protoc failed")
    grpc_module = out_dir / "hedgefs_pb2_grpc.py"
    text = grpc_module.read_text()
    text = text.replace("import hedgefs_pb2 as", "from hedgefs.proto import hedgefs_pb2 as")
    grpc_module.write_text(text)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = pathlib.Path(tmp)
        generate(tmp_path)
        for name in GENERATED:
            (PROTO_DIR / name).write_bytes((tmp_path / name).read_bytes())
    print("regenerated:", ", ".join(GENERATED), file=sys.stderr)


if __name__ == "__main__":
    main()
