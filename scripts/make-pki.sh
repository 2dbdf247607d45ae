#!/usr/bin/env bash
# Makes a throwaway PKI for the APNs simulator, the demo, tests and benchmarks:
#   ca.pem/ca.key          a private CA (clients trust it through apns.ca_file)
#   server.pem/server.key  the simulator's certificate for localhost and 127.0.0.1
#   other-host.pem/.key    a certificate from the same CA for another name only (host-name checks)
#   client.pem/client.key  an APNs-style client certificate, subject UID=<bundle id>
#   client.p12             the same as PKCS#12, password in client.p12.password
#   AuthKey.p8             an ES256 signing key (PKCS#8, like Apple's), public half in AuthKey.pub.pem
# Usage: scripts/make-pki.sh DIR [BUNDLE_ID]. Never use these files in production.
set -euo pipefail
dir=$1
bundle=${2:-com.example.app}
mkdir -p "$dir"
cd "$dir"
[ -f AuthKey.p8 ] && exit 0
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj "/CN=pushgw test CA" -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
  -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
  -extfile server.ext -out server.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=elsewhere.example" \
  -keyout other-host.key -out other-host.csr 2>/dev/null
printf 'subjectAltName=DNS:elsewhere.example\nextendedKeyUsage=serverAuth\n' > other-host.ext
openssl x509 -req -in other-host.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
  -extfile other-host.ext -out other-host.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -subj "/UID=$bundle/CN=Apple Push Services: $bundle" -keyout client.key -out client.csr 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
  -extfile client.ext -out client.pem 2>/dev/null
echo "test-password" > client.p12.password
openssl pkcs12 -export -in client.pem -inkey client.key -passout file:client.p12.password -out client.p12 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out jwt.key 2>/dev/null
openssl pkcs8 -topk8 -nocrypt -in jwt.key -out AuthKey.p8
openssl pkey -in AuthKey.p8 -pubout -out AuthKey.pub.pem
rm -f server.csr client.csr other-host.csr server.ext client.ext other-host.ext jwt.key ca.srl
chmod 600 ./*.key AuthKey.p8 client.p12 client.p12.password
