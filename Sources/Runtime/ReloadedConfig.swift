import TrackerLogic

/// What SIGHUP's reload of the config file gives a running node: the settings to apply,
/// and `applied`, called once they are in effect. The log's "configuration reloaded" is
/// said there and not before, so that what reads it (an operator, a test) can count on
/// the next request getting the new settings.
public struct ReloadedConfig: Sendable {
    public var config: TrackerConfig
    public var applied: @Sendable () -> Void

    public init(config: TrackerConfig, applied: @escaping @Sendable () -> Void) {
        self.config = config
        self.applied = applied
    }
}
