"""Plays the expert through one episode per web family and writes a picture strip of it.

Each strip is a row of screenshots (``render_mode="rgb_array"``) taken at the
reset, at evenly spaced steps and at the last step, cropped where the page
fills only a corner (MiniWoB++), scaled down and labelled
with the step and the action that led there, saved as a small PNG (a 64-colour
palette) under ``docs/envs/strips/``. The web page of the docs shows them.

Usage:
    python scripts/picture_strip.py [--out docs/envs/strips] [--frames 6] [--width 320]
        [--seed 3] [--env feedbackgym/WebCheckout-v0 ...]

Example:
    >>> strip = make_strip([np.zeros((768, 1024, 3), np.uint8)] * 2, ["reset", "step 1"], 160)
    >>> strip.size
    (324, 140)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gymnasium as gym
import numpy as np
from PIL import Image, ImageDraw

import feedbackgym

gym.register_envs(feedbackgym)

ENVS = (
    "feedbackgym/WebCheckout-v0",
    "feedbackgym/WebForm-v0",
    "feedbackgym/WebOrderAdmin-v0",
    "feedbackgym/MiniWoB-click-checkboxes-v0",
)
"""The three task families and one MiniWoB++ page."""
CROPS = {"feedbackgym/MiniWoB-": (240, 400)}
"""Env id prefix -> the top-left rows and columns kept (a MiniWoB++ task fills a small corner)."""
GAP = 4
"""Pixels between two frames."""
LABEL = 20
"""Height of the label band under each frame."""


def play_expert(env_id: str, seed: int) -> tuple[list[np.ndarray], list[str], bool]:
    """Plays the expert through one episode; returns every frame, its label and the success."""
    env = gym.make(env_id, render_mode="rgb_array")
    try:
        env.reset(seed=seed)
        frames: list[np.ndarray] = [env.render()]  # type: ignore[list-item]
        labels = ["reset"]
        done, step = False, 0
        info: dict[str, object] = {}
        while not done:
            action = int(env.unwrapped.expert_action())  # type: ignore[attr-defined]
            meaning = env.unwrapped.action_meanings[action]  # type: ignore[attr-defined]
            _, _, terminated, truncated, info = env.step(action)
            step += 1
            frames.append(env.render())  # type: ignore[arg-type]
            labels.append(f"{step}: {meaning}")
            done = terminated or truncated
        return frames, labels, bool(info.get("is_success"))
    finally:
        env.close()


def pick(count: int, total: int) -> list[int]:
    """``count`` evenly spaced indices of ``range(total)``, the first and the last included.

    Example:
        >>> pick(4, 10)
        [0, 3, 6, 9]
    """
    if total <= count:
        return list(range(total))
    return [round(i * (total - 1) / (count - 1)) for i in range(count)]


def make_strip(frames: list[np.ndarray], labels: list[str], width: int) -> Image.Image:
    """The frames side by side, each scaled to ``width`` pixels wide, with its label under it."""
    scaled = []
    for frame in frames:
        image = Image.fromarray(frame)
        height = round(image.height * width / image.width)
        scaled.append(image.resize((width, height), Image.Resampling.LANCZOS))
    height = max(image.height for image in scaled)
    strip = Image.new("RGB", (len(scaled) * (width + GAP) - GAP, height + LABEL), "white")
    draw = ImageDraw.Draw(strip)
    for k, (image, label) in enumerate(zip(scaled, labels, strict=True)):
        x = k * (width + GAP)
        strip.paste(image, (x, 0))
        draw.rectangle((x, height, x + width - 1, height + LABEL - 1), fill=(235, 238, 242))
        text = label if len(label) <= width // 6 else label[: width // 6 - 1] + "…"
        draw.text((x + 4, height + 4), text, fill=(20, 20, 20))
    return strip


def save_small(strip: Image.Image, path: Path, colors: int = 64) -> int:
    """Saves ``strip`` as a palette PNG of ``colors`` colours; returns its size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    strip.quantize(colors=colors, dither=Image.Dither.NONE).save(path, optimize=True)
    return path.stat().st_size


def main(argv: list[str] | None = None) -> None:
    """Writes one strip per env and prints where, how long the episode was and the size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/envs/strips"))
    parser.add_argument("--frames", type=int, default=6, help="frames per strip")
    parser.add_argument("--width", type=int, default=320, help="pixels per frame")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--env", nargs="+", default=list(ENVS), help="env ids")
    args = parser.parse_args(argv)
    for env_id in args.env:
        frames, labels, success = play_expert(env_id, args.seed)
        chosen = pick(args.frames, len(frames))
        for prefix, (rows, columns) in CROPS.items():
            if env_id.startswith(prefix):
                frames = [frame[:rows, :columns] for frame in frames]
        strip = make_strip([frames[i] for i in chosen], [labels[i] for i in chosen], args.width)
        name = env_id.removeprefix("feedbackgym/").removesuffix("-v0")
        path = args.out / f"{name}.png"
        size = save_small(strip, path)
        print(
            f"{env_id}: {len(frames) - 1} steps, success={success}, "
            f"{path} ({strip.width}x{strip.height}, {size / 1024:.0f} KB)"
        )


if __name__ == "__main__":
    main()
