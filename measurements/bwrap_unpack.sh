#!/bin/sh
# Unpack carried bubblewrap .debs on a host without bwrap (a bare GPU machine with no network), for
# measurements/gpu_sandbox_check.py:   sh measurements/bwrap_unpack.sh [DEBS=.bwrap] [DEST=/tmp/bw]
# then put DEST/bin first on PATH (the sandbox finds bwrap with shutil.which). DEST/bin/bwrap is the unpacked
# binary, or, when the host lacks one of its libraries (libcap2, libselinux1, libpcre2-8-0), a wrapper that
# gives it the unpacked ones through LD_LIBRARY_PATH: set for bwrap itself, because the sandbox starts it with
# a scrubbed environment (inside the sandbox DEST does not exist: /tmp is the child's own).
# The .debs: `apt-get download bubblewrap libcap2 libselinux1 libpcre2-8-0` (Debian 12: bwrap 0.8.0, glibc 2.34+).
set -eu
debs=${1:-.bwrap}
dest=${2:-/tmp/bw}
mkdir -p "$dest/bin"
for f in "$debs"/*.deb; do
    if command -v dpkg >/dev/null; then dpkg -x "$f" "$dest"
    else  # no dpkg: the data member by hand (binutils' ar; Debian 12's debs hold data.tar.xz)
        member=$(ar t "$f" | grep '^data.tar'); ar p "$f" "$member" | tar -x -a -f - -C "$dest" 2>/dev/null \
            || ar p "$f" "$member" | xz -d | tar -x -C "$dest"
    fi
done
chmod 755 "$dest" "$dest/bin"
libs="$dest/lib/x86_64-linux-gnu:$dest/usr/lib/x86_64-linux-gnu"
if [ "${BWRAP_FORCE_WRAPPER:-0}" = 1 ] || ldd "$dest/usr/bin/bwrap" | grep -q 'not found'; then
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
        "$libs" "$dest/usr/bin/bwrap" > "$dest/bin/bwrap"
    chmod 755 "$dest/bin/bwrap"
    echo "bwrap_unpack: $dest/bin/bwrap wraps the unpacked bwrap with its libraries ($libs)"
else
    ln -sf "$dest/usr/bin/bwrap" "$dest/bin/bwrap"
    echo "bwrap_unpack: $dest/bin/bwrap -> the unpacked bwrap (the host has its libraries)"
fi
"$dest/bin/bwrap" --version
