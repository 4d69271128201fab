"""Count the words of a file, print them, and leave the count in a file beside it."""

import sys
from pathlib import Path

name = sys.argv[1]
words = len(Path(name).read_text().split())
stop = Path(__file__).parent.parent / "stopwords.txt"
print(f"{name}: {words} words ({len(stop.read_text().split())} stopwords known)")
Path(f"{name}.count").write_text(str(words))
