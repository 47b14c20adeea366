"""Vectors as they are stored: int8 components and one float scale per vector (a unit vector
of 384 dimensions is 384 bytes + 8, a quarter of float32). Pure numpy, no Django."""

from __future__ import annotations

import numpy as np


def quantize(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 rows, scales) with rows ≈ int8 times scale: each row's largest component maps to 127,
    so the rounding error of a component is at most half its row's scale."""
    rows = np.asarray(rows, dtype=np.float32)
    peak = np.abs(rows).max(axis=1)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    return np.clip(np.rint(rows / scales[:, None]), -127, 127).astype(np.int8), scales


def dequantize(data: bytes, scales: np.ndarray, dimensions: int) -> np.ndarray:
    """float32 rows from the concatenated int8 bytes of len(scales) vectors."""
    codes = np.frombuffer(data, dtype=np.int8).reshape(len(scales), dimensions)
    return codes.astype(np.float32) * np.asarray(scales, dtype=np.float32)[:, None]


def unit(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero), so a dot product is the cosine."""
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)
