import Testing
import TrackerRuntime

/// The layers of a node's settings (`ConfigLayers`): the file, its drop-ins in name
/// order, then `TRACKER_<KEY>`, each key replacing the one before whole.
@Suite("Config layers") struct ConfigLayersTests {
    let keys = ["udp", "interval", "numwant-max", "trust-announced-ip", "broker", "cluster-key-file"]

    func layers(_ files: [String: String]) -> ConfigLayers {
        ConfigLayers(keys: keys, read: { files[$0] }, list: { dir in
            let names = files.keys.filter { $0.hasPrefix(dir + "/") }.map { String($0.dropFirst(dir.count + 1)) }
            return names.isEmpty ? nil : names
        })
    }

    @Test func laterLayersReplaceEarlierOnesAndSayWhereEachValueCameFrom() throws {
        let l = layers(["/e/t.toml": "interval = 1800\nnumwant-max = 200\nudp = [\"0.0.0.0:6969\", \"[::]:6969\"]\n",
                        "/e/t.toml.d/50-b.toml": "numwant-max = 150\n",
                        "/e/t.toml.d/10-a.toml": "numwant-max = 100\ninterval = 900\n",
                        "/e/t.toml.d/notes.txt": "ignored = 1\n"])
        let s = try l.settings(path: "/e/t.toml", environment: ["TRACKER_INTERVAL": "600", "TRACKER_BIN": "/x/tracker"])
        #expect(s["numwant-max"] == .init(arguments: ["--numwant-max", "150"], source: "/e/t.toml.d/50-b.toml"))
        #expect(s["interval"] == .init(arguments: ["--interval", "600"], source: "environment TRACKER_INTERVAL"))
        #expect(s["udp"]?.arguments == ["--udp", "0.0.0.0:6969", "--udp", "[::]:6969"])
        #expect(s["bin"] == nil, "a TRACKER_ variable that is no key is not ours to judge")
        #expect(l.files(of: "/e/t.toml") == ["/e/t.toml", "/e/t.toml.d/10-a.toml", "/e/t.toml.d/50-b.toml"])
    }

    @Test func anEmptyListOrFalseUnsetsAKey() throws {
        let l = layers(["/t.toml": "udp = [\"0.0.0.0:6969\"]\ntrust-announced-ip = true\n",
                        "/t.toml.d/cluster.toml": "udp = []\ntrust-announced-ip = false\n"])
        let s = try l.settings(path: "/t.toml", environment: [:])
        #expect(s["udp"]?.arguments == [])
        #expect(s["trust-announced-ip"]?.arguments == [])
    }

    @Test func anEnvironmentValueIsTOMLWhenItReadsAsOneElseAString() throws {
        let l = layers([:])
        let s = try l.settings(path: nil, environment: [
            "TRACKER_UDP": "[\"127.0.0.1:1\", \"[::1]:1\"]", "TRACKER_TRUST_ANNOUNCED_IP": "true",
            "TRACKER_BROKER": "stomp://a:61613,stomp://b:61613", "TRACKER_CLUSTER_KEY_FILE": "/etc/tracker/cluster.key"])
        #expect(s["udp"]?.arguments == ["--udp", "127.0.0.1:1", "--udp", "[::1]:1"])
        #expect(s["trust-announced-ip"]?.arguments == ["--trust-announced-ip"])
        #expect(s["broker"]?.arguments == ["--broker", "stomp://a:61613,stomp://b:61613"])
        #expect(s["cluster-key-file"]?.arguments == ["--cluster-key-file", "/etc/tracker/cluster.key"])
        #expect(ConfigLayers.variable(for: "numwant-max") == "TRACKER_NUMWANT_MAX")
    }

    @Test func aProblemNamesItsLayer() {
        let l = layers(["/t.toml": "interval = 1800\n", "/t.toml.d/20-x.toml": "interval = [\n"])
        #expect(throws: ConfigLayers.Problem(description: "config /t.toml.d/20-x.toml: line 1: Error while parsing array: encountered end-of-file")) {
            _ = try l.settings(path: "/t.toml", environment: [:])
        }
        let nested = layers(["/t.toml": "interval = { a = 1 }\n"])
        #expect(throws: ConfigLayers.Problem.self) { _ = try nested.settings(path: "/t.toml", environment: [:]) }
        #expect(throws: ConfigLayers.Problem(description: "config environment TRACKER_UDP: key 'udp': a list may hold only strings or numbers")) {
            _ = try layers([:]).settings(path: nil, environment: ["TRACKER_UDP": "[[1]]"])
        }
        #expect(throws: ConfigLayers.Problem(description: "config /missing.toml: cannot read it")) {
            _ = try layers([:]).settings(path: "/missing.toml", environment: [:])
        }
    }

    @Test func aSubstituteIsReadInPlaceOfItsLayerOrAsTheLastDropIn() throws {
        let l = layers(["/t.toml": "interval = 1800\n", "/t.toml.d/90-dashboard.toml": "interval = 900\n", "/cand": "interval = 700\n"])
        let replaced = try l.settings(path: "/t.toml", environment: [:], replacing: ("/t.toml.d/90-dashboard.toml", "/cand"))
        #expect(replaced["interval"] == .init(arguments: ["--interval", "700"], source: "/t.toml.d/90-dashboard.toml"))
        let added = try layers(["/t.toml": "interval = 1800\n", "/cand": "interval = 700\n"])
            .settings(path: "/t.toml", environment: [:], replacing: ("/t.toml.d/90-dashboard.toml", "/cand"))
        #expect(added["interval"]?.arguments == ["--interval", "700"])
    }
}
