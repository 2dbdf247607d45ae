extension String {
    /// Calls `body` with the string's UTF-8 bytes, contiguous. For the loop's hot paths, which
    /// read every event's strings byte by byte: a native string's bytes are read where they
    /// are, without the copy `withUTF8` needs (`var copy = s`, a retain and a release, atomic,
    /// per call); any other string is made contiguous first.
    @inlinable @inline(__always)
    public func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return try copy.withUTF8(body)
    }
}
