// OpenSSL function-like macros that Swift cannot import, as plain functions.
// Nothing else belongs here: everything importable is called from Swift directly.
#ifndef PUSHGW_CMACROS_H
#define PUSHGW_CMACROS_H
#include <features.h>
#include <openssl/ssl.h>

/// SSL_set_tlsext_host_name: sets SNI on a client connection.
long pushgw_ssl_set_sni(SSL *ssl, const char *host);
/// SSL_CTX_set_min_proto_version.
long pushgw_ssl_ctx_set_min_tls12(SSL_CTX *ctx);
/// SSL_OP_IGNORE_UNEXPECTED_EOF (libevent 2.1 predates OpenSSL 3's EOF handling).
unsigned long long pushgw_ssl_op_ignore_unexpected_eof(void);
/// SSL_set_mode.
long pushgw_ssl_set_mode(SSL *ssl, long mode);
/// OPENSSL_free.
void pushgw_openssl_free(void *p);
/// SSL_CTX_set_ecdh_auto is a no-op in OpenSSL 3; kept out. BIO_get_mem_data:
long pushgw_bio_get_mem_data(BIO *bio, char **out);

#endif
