public enum SimModule {}
