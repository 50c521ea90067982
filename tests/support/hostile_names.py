"""File names that must round-trip exactly and never reach a shell as code."""

HOSTILE_NAMES = [
    "with space.jpg",
    "quote'single.jpg",
    'quote"double.jpg',
    "back\\slash.jpg",
    "new\nline.jpg",
    "中文 图片.jpg",
    "-rf --leading-dash.jpg",
    "$(touch PWNED).jpg",
    "`touch PWNED2`.jpg",
    "semi;colon&amp|pipe>redir.jpg",
]
LONG_NAME = "x" * 180 + ".jpg"
