#include "CMacros.h"

long pushgw_ssl_set_sni(SSL *ssl, const char *host) { return SSL_set_tlsext_host_name(ssl, host); }
long pushgw_ssl_ctx_set_min_tls12(SSL_CTX *ctx) { return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION); }
unsigned long long pushgw_ssl_op_ignore_unexpected_eof(void) { return SSL_OP_IGNORE_UNEXPECTED_EOF; }
long pushgw_ssl_set_mode(SSL *ssl, long mode) { return SSL_set_mode(ssl, mode); }
void pushgw_openssl_free(void *p) { OPENSSL_free(p); }
long pushgw_bio_get_mem_data(BIO *bio, char **out) { return BIO_get_mem_data(bio, out); }
