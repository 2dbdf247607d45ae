public enum GatewayModule {}
