#!/usr/bin/env python3
"""Writes an xyz file of NX×NY×NZ water molecules on a cubic grid (3.1 Å apart, about liquid water's
density), each randomly oriented and displaced by up to 0.2 Å, from a fixed seed. A molecule is
drawn again while one of its atoms lies closer than 1.8 Å to an atom of an earlier molecule, so that
no two molecules are closer than a hydrogen bond.

    python3 water_box.py NX NY NZ SEED > box.xyz

Molecules are listed with z varying fastest and x slowest, so that along a long x axis molecules
near in the list are near in space.
"""
import math
import random
import sys

SPACING = 3.1  # Å
SHIFT = 0.2  # Å, largest displacement of an oxygen from its grid point along each axis
OH = 0.9572  # Å, gas-phase O–H bond length
HOH = math.radians(104.52)  # gas-phase H–O–H angle
CLOSEST = 1.8  # Å, about the length of a hydrogen bond


def random_rotation(rng):
    """A uniformly random rotation matrix, from a unit quaternion."""
    q = [rng.gauss(0.0, 1.0) for _ in range(4)]
    norm = math.sqrt(sum(x * x for x in q))
    w, x, y, z = (c / norm for c in q)
    return [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]


def main():
    nx, ny, nz, seed = (int(a) for a in sys.argv[1:5])
    rng = random.Random(seed)
    half = HOH / 2
    hydrogens = [(OH * math.sin(half), 0.0, OH * math.cos(half)), (-OH * math.sin(half), 0.0, OH * math.cos(half))]
    print(3 * nx * ny * nz)
    print(f"water box {nx}x{ny}x{nz} seed {seed}")
    placed = []
    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                while True:
                    oxygen = [SPACING * g + rng.uniform(-SHIFT, SHIFT) for g in (i, j, k)]
                    rotation = random_rotation(rng)
                    atoms = [oxygen] + [
                        [oxygen[r] + sum(rotation[r][c] * h[c] for c in range(3)) for r in range(3)] for h in hydrogens
                    ]
                    if all(math.dist(a, b) >= CLOSEST for a in atoms for b in placed):
                        break
                placed.extend(atoms)
                for element, atom in zip("OHH", atoms):
                    print(element + " " + " ".join(f"{c:.5f}" for c in atom))


if __name__ == "__main__":
    main()
