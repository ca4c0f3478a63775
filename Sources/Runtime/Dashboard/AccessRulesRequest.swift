import Foundation
import TrackerLogic

/// The body of `POST /api/access/rules`: `{"rule": "allow" | "deny" | "remove",
/// "infoHashes": [40 hex digits, …]}`, as the catalogue change it asks for. Anything
/// else (another rule, a hash that is not forty hex digits, no hashes, too many) is nil:
/// the API answers 400 and nothing is submitted.
struct AccessRulesRequest: Codable {
    var rule: String
    var infoHashes: [String]

    static func change(_ body: Data) -> CatalogueChange? {
        guard let request = try? JSONDecoder().decode(Self.self, from: body),
              (1...AccessPolicy.maxHashesPerChange).contains(request.infoHashes.count) else { return nil }
        var hashes: [InfoHash] = []
        for text in request.infoHashes {
            guard let hash = InfoHash(hex: text) else { return nil }
            hashes.append(hash)
        }
        switch request.rule {
        case "allow": return .setAccessRule(.allow, hashes)
        case "deny": return .setAccessRule(.deny, hashes)
        case "remove": return .removeAccessRules(hashes)
        default: return nil
        }
    }
}

/// The body of `POST /api/access/clients`: `{"rule": "allow" | "deny" | "remove",
/// "prefixes": ["-UT355-", "0x2d5554", …]}` (`ClientPrefix`), as the catalogue change it
/// asks for, or nil for anything else.
struct ClientRulesRequest: Codable {
    var rule: String
    var prefixes: [String]

    static func change(_ body: Data) -> CatalogueChange? {
        guard let request = try? JSONDecoder().decode(Self.self, from: body),
              (1...AccessPolicy.maxHashesPerChange).contains(request.prefixes.count) else { return nil }
        var prefixes: [ClientPrefix] = []
        for text in request.prefixes {
            guard let prefix = ClientPrefix(text) else { return nil }
            prefixes.append(prefix)
        }
        switch request.rule {
        case "allow": return .setClientRule(.allow, prefixes)
        case "deny": return .setClientRule(.deny, prefixes)
        case "remove": return .removeClientRules(prefixes)
        default: return nil
        }
    }
}
