#!/usr/bin/env bash
# Makes bench/device/sysroot on a Debian machine (this project's development machines) for an
# accelerator machine that cannot download (../shared/DEVICE.md): the engine's libraries that are
# missing there (libsodium, cpp-httplib and its brotli; OpenSSL's headers in case), unpacked from Debian's .deb files with
# dpkg -x, and .pc files of their own (Debian's cpp-httplib.pc requires pkg-config modules that are
# not there). bench/device/run.sh uses it when present; carry it with the run (a few MiB).
set -euo pipefail
cd "$(dirname "$0")"
rm -rf sysroot debs && mkdir -p sysroot/pkgconfig debs
(cd debs && apt-get download libsodium-dev libsodium23 libcpp-httplib-dev libcpp-httplib0.11 \
   libbrotli1 libssl-dev libssl3 > /dev/null)
for deb in debs/*.deb; do dpkg -x "$deb" sysroot; done
# Paths relative to the .pc file (${pcfiledir}): the sysroot moves with the checkout.
cat > sysroot/pkgconfig/libsodium.pc <<PC
prefix=\${pcfiledir}/..
Name: libsodium
Description: libsodium (Debian's, unpacked by bench/device/prepare.sh)
Version: 1.0.18
Libs: -L\${prefix}/usr/lib/x86_64-linux-gnu -lsodium
Cflags: -I\${prefix}/usr/include
PC
cat > sysroot/pkgconfig/cpp-httplib.pc <<PC
prefix=\${pcfiledir}/..
Name: cpp-httplib
Description: cpp-httplib (Debian's, unpacked by bench/device/prepare.sh)
Version: 0.11.4
Libs: -L\${prefix}/usr/lib/x86_64-linux-gnu -lcpp-httplib
Cflags: -I\${prefix}/usr/include -DCPPHTTPLIB_OPENSSL_SUPPORT -DCPPHTTPLIB_ZLIB_SUPPORT -DCPPHTTPLIB_BROTLI_SUPPORT
PC
rm -rf debs sysroot/usr/share
find sysroot -name '*.a' -delete  # shared objects only: the carry is small
du -sh sysroot
