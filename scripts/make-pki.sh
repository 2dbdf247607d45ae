#!/usr/bin/env bash
# Makes a throwaway PKI for the APNs simulator, the demo, tests and benchmarks:
#   ca.pem/ca.key          a private CA (clients trust it through apns.ca_file)
#   server.pem/server.key  the simulator's certificate for localhost and 127.0.0.1
#   other-host.pem/.key    a certificate from the same CA for another name only (host-name checks)
#   client.pem/client.key  an APNs-style client certificate, subject UID=<bundle id>
#   client.p12             the same as PKCS#12, password in client.p12.password
#   AuthKey.p8             an ES256 signing key (PKCS#8, like Apple's), public half in AuthKey.pub.pem
#   fcm-service-account.key  an RSA 2048 key for a Google service account (FCM's RS256 OAuth JWT),
#                          public half in fcm-service-account.pub.pem
# and, for Redis over TLS (redis-server --tls-port):
#   redis.pem/redis.key                    redis-server's certificate for localhost and 127.0.0.1
#   redis-client.pem/redis-client.key      a client certificate for servers that require one (CN=pushgw)
#   redis-expired.pem/redis-expired.key    a server certificate for localhost and 127.0.0.1 that has expired
#   redis-otherhost.pem/redis-otherhost.key  a server certificate for other.example only (a wrong host name)
#   other-ca.pem                           a second CA that signed none of these (a wrong trust anchor)
# Usage: scripts/make-pki.sh DIR [BUNDLE_ID]. Never use these files in production.
set -euo pipefail
dir=$1
bundle=${2:-com.example.app}
mkdir -p "$dir"
cd "$dir"
# Made apart from the rest, so that a directory made before it was added gets it too.
if [ ! -f fcm-service-account.pub.pem ]; then
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out fcm-service-account.key 2>/dev/null
  chmod 600 fcm-service-account.key
  openssl pkey -in fcm-service-account.key -pubout -out fcm-service-account.pub.pem 2>/dev/null
fi
# The last file written marks a complete directory.
[ -f other-ca.pem ] && exit 0
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
  -subj "/CN=pushgw test CA" -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
  -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
  -extfile server.ext -out server.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=elsewhere.example" \
  -keyout other-host.key -out other-host.csr 2>/dev/null
printf 'subjectAltName=DNS:elsewhere.example\nextendedKeyUsage=serverAuth\n' > other-host.ext
openssl x509 -req -in other-host.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
  -extfile other-host.ext -out other-host.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -subj "/UID=$bundle/CN=Apple Push Services: $bundle" -keyout client.key -out client.csr 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
  -extfile client.ext -out client.pem 2>/dev/null
echo "test-password" > client.p12.password
openssl pkcs12 -export -in client.pem -inkey client.key -passout file:client.p12.password -out client.p12 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out jwt.key 2>/dev/null
openssl pkcs8 -topk8 -nocrypt -in jwt.key -out AuthKey.p8
openssl pkey -in AuthKey.p8 -pubout -out AuthKey.pub.pem
# signed NAME DAYS EXT SUBJECT: a P-256 key NAME.key and its certificate NAME.pem, signed by the CA.
# OpenSSL 3 accepts a negative DAYS: the certificate's end lies before its start (expired).
signed() {
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$4" -keyout "$1.key" -out "$1.csr" 2>/dev/null
  printf '%b' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days "$2" -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
signed redis 365 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' "/CN=localhost"
signed redis-client 365 'extendedKeyUsage=clientAuth\n' "/CN=pushgw"
signed redis-expired -1 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' "/CN=localhost"
signed redis-otherhost 365 'subjectAltName=DNS:other.example\nextendedKeyUsage=serverAuth\n' "/CN=other.example"
rm -f server.csr client.csr other-host.csr server.ext client.ext other-host.ext jwt.key ca.srl
chmod 600 ./*.key AuthKey.p8 client.p12 client.p12.password
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
  -subj "/CN=another test CA" -keyout other-ca.key -out other-ca.pem.tmp 2>/dev/null
rm -f other-ca.key
mv other-ca.pem.tmp other-ca.pem
