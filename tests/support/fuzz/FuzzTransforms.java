// Applies Kafka's own converters, SMTs and predicates (and Debezium's, with its jar on the classpath) to records
// read as JSON lines on stdin, one case per line, and writes one JSON line of results per case on stdout.
// Run by tests/support/fuzz_reference.py (java source-file mode, one JVM per test run, many cases per JVM).
//
// A case: {"config": {<a connector config's converter and transforms/predicates keys, Kafka's own names>},
//          "records": [{"key": <bytes as base64 or null>, "value": <base64 or null>, "topic", "partition",
//                       "offset", "timestamp", "headers": [[name, <base64 or null>], ...]}]}
// or a batch: {"configs": {<name>: <config>, ...}, "cases": [<records>, ...]}, answered by one line
// {<name>: [<the results of each case>], ...} (one round trip for every chain of a fuzzer's family).
// Each record is read as Kafka Connect's sink task reads it: key.converter/value.converter (the classes named, with
// their sub-keys; JsonConverter when unset) turn the
// bytes into a SinkRecord (headers through SimpleHeaderConverter, Kafka's default header.converter), then each stage of the chain runs as Kafka's TransformationStage
// runs it (predicate.test(record) ^ negate). A result: {"key": <JsonConverter's JSON of the key (an envelope
// when the input's schemas.enable is true)>,
// "value": ..., "topic", "partition", "timestamp", "headers": [[name, <base64 of SimpleHeaderConverter's bytes, Kafka's default header.converter>]]}, {"dropped": true}, or
// {"error": <exception class>, "stage": "KEY_CONVERTER" | "VALUE_CONVERTER" | "TRANSFORMATION", "message": ...}.
// A config with "fuzz.record": "source" runs the chain on a SourceRecord instead (no source partition or offset),
// as a source connector's SMTs run: Debezium's outbox EventRouter makes records without a Kafka partition, which a
// SinkRecord cannot hold.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;
import org.apache.kafka.connect.transforms.Transformation;
import org.apache.kafka.connect.transforms.predicates.Predicate;

public class FuzzTransforms {
    static final ObjectMapper JSON = new ObjectMapper();

    @SuppressWarnings("rawtypes")
    static final class Stage {
        Transformation transform;
        Predicate predicate;
        boolean negate;
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode kase = JSON.readTree(line);
            if (kase.has("configs")) {
                // a batch: every named config over every case, one line of results {name: [results of each case]}
                ObjectNode all = JSON.createObjectNode();
                for (Iterator<Map.Entry<String, JsonNode>> it = kase.get("configs").fields(); it.hasNext(); ) {
                    Map.Entry<String, JsonNode> named = it.next();
                    ArrayNode perCase = all.putArray(named.getKey());
                    for (JsonNode records : kase.get("cases")) {
                        perCase.add(runCase(named.getValue(), records));
                    }
                }
                out.println(JSON.writeValueAsString(all));
                out.flush();
                continue;
            }
            out.println(JSON.writeValueAsString(runCase(kase.get("config"), kase.get("records"))));
            out.flush();
        }
    }

    static ArrayNode runCase(JsonNode configNode, JsonNode records) {
        ArrayNode results = JSON.createArrayNode();
        try {
            Map<String, String> config = new HashMap<>();
            configNode.fields().forEachRemaining(e -> config.put(e.getKey(), e.getValue().asText()));
            Converter keyIn = converter(config, "key.converter", true);
            Converter valueIn = converter(config, "value.converter", false);
            JsonConverter keyOut = output(config, "key.converter.", true);
            JsonConverter valueOut = output(config, "value.converter.", false);
            SimpleHeaderConverter headerOut = new SimpleHeaderConverter();
            headerOut.configure(Map.of());
            List<Stage> chain = chain(config);
            boolean source = "source".equals(config.get("fuzz.record"));
            for (JsonNode rec : records) {
                results.add(one(rec, headerOut, keyIn, valueIn, chain, keyOut, valueOut, headerOut, source));
            }
            for (Stage s : chain) {
                s.transform.close();
            }
        } catch (Exception e) {
            ObjectNode failure = JSON.createObjectNode();
            failure.put("config_error", e.getClass().getName());
            failure.put("message", String.valueOf(e.getMessage()));
            results.add(failure);
        }
        return results;
    }

    // The converter that key.converter/value.converter names (JsonConverter when unset), configured with its
    // sub-keys as Kafka's worker passes them.
    static Converter converter(Map<String, String> config, String name, boolean isKey) throws Exception {
        String prefix = name + ".";
        Map<String, String> sub = new HashMap<>();
        config.forEach((k, v) -> {
            if (k.startsWith(prefix)) {
                sub.put(k.substring(prefix.length()), v);
            }
        });
        Converter conv = (Converter) Class.forName(config.getOrDefault(name, JsonConverter.class.getName()))
                .getDeclaredConstructor().newInstance();
        conv.configure(sub, isKey);
        return conv;
    }

    // The output's JsonConverter has the input's schemas.enable (envelopes out of envelopes, bare JSON out of
    // schemaless JSON) and its decimal.format and replace.null.with.default (the options that change what it
    // writes).
    static JsonConverter output(Map<String, String> config, String prefix, boolean isKey) {
        Map<String, String> sub = new HashMap<>();
        sub.put("schemas.enable", config.getOrDefault(prefix + "schemas.enable", "true"));
        for (String option : new String[] {"decimal.format", "replace.null.with.default"}) {
            if (config.containsKey(prefix + option)) {
                sub.put(option, config.get(prefix + option));
            }
        }
        JsonConverter conv = new JsonConverter();
        conv.configure(sub, isKey);
        return conv;
    }

    @SuppressWarnings("unchecked")
    static List<Stage> chain(Map<String, String> config) throws Exception {
        List<Stage> stages = new ArrayList<>();
        String aliases = config.getOrDefault("transforms", "").trim();
        if (aliases.isEmpty()) {
            return stages;
        }
        for (String alias : aliases.split(",")) {
            alias = alias.trim();
            String prefix = "transforms." + alias + ".";
            Stage stage = new Stage();
            stage.transform = (Transformation) Class.forName(config.get(prefix + "type"))
                    .getDeclaredConstructor().newInstance();
            Map<String, String> sub = new HashMap<>();
            config.forEach((k, v) -> {
                if (k.startsWith(prefix) && !k.equals(prefix + "type")) {
                    sub.put(k.substring(prefix.length()), v);
                }
            });
            String predicateName = sub.remove("predicate");
            stage.negate = Boolean.parseBoolean(sub.remove("negate"));
            stage.transform.configure(sub);
            if (predicateName != null) {
                String pprefix = "predicates." + predicateName + ".";
                stage.predicate = (Predicate) Class.forName(config.get(pprefix + "type"))
                        .getDeclaredConstructor().newInstance();
                Map<String, String> psub = new HashMap<>();
                config.forEach((k, v) -> {
                    if (k.startsWith(pprefix) && !k.equals(pprefix + "type")) {
                        psub.put(k.substring(pprefix.length()), v);
                    }
                });
                stage.predicate.configure(psub);
            }
            stages.add(stage);
        }
        return stages;
    }

    static byte[] bytes(JsonNode node) {
        return node == null || node.isNull() ? null : Base64.getDecoder().decode(node.asText());
    }

    static ObjectNode error(String stage, Throwable e) {
        ObjectNode failure = JSON.createObjectNode();
        failure.put("stage", stage);
        failure.put("error", e.getClass().getName());
        failure.put("message", String.valueOf(e.getMessage()));
        return failure;
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    static ObjectNode one(JsonNode rec, SimpleHeaderConverter headerIn, Converter keyIn, Converter valueIn, List<Stage> chain,
                          JsonConverter keyOut, JsonConverter valueOut, SimpleHeaderConverter headerOut, boolean source)
            throws Exception {
        String topic = rec.get("topic").asText();
        SchemaAndValue key;
        SchemaAndValue value;
        try {
            key = keyIn.toConnectData(topic, bytes(rec.get("key")));
        } catch (Exception e) {
            return error("KEY_CONVERTER", e);
        }
        try {
            value = valueIn.toConnectData(topic, bytes(rec.get("value")));
        } catch (Exception e) {
            return error("VALUE_CONVERTER", e);
        }
        ConnectHeaders headers = new ConnectHeaders();
        JsonNode hs = rec.get("headers");
        if (hs != null) {
            for (JsonNode h : hs) {
                String name = h.get(0).asText();
                try {
                    SchemaAndValue header = headerIn.toConnectHeader(topic, name, bytes(h.get(1)));
                    headers.add(name, header);
                } catch (Exception e) {
                    return error("HEADER_CONVERTER", e);
                }
            }
        }
        ConnectRecord record = source
                ? new SourceRecord(null, null, topic, rec.get("partition").asInt(), key.schema(), key.value(),
                        value.schema(), value.value(), rec.get("timestamp").asLong(), headers)
                : new SinkRecord(topic, rec.get("partition").asInt(), key.schema(), key.value(),
                        value.schema(), value.value(), rec.get("offset").asLong(), rec.get("timestamp").asLong(),
                        TimestampType.CREATE_TIME, headers);
        for (Stage stage : chain) {
            try {
                if (stage.predicate == null || stage.predicate.test(record) ^ stage.negate) {
                    record = (ConnectRecord) stage.transform.apply(record);
                }
            } catch (Exception e) {
                return error("TRANSFORMATION", e);
            }
            if (record == null) {
                ObjectNode dropped = JSON.createObjectNode();
                dropped.put("dropped", true);
                return dropped;
            }
        }
        ObjectNode result = JSON.createObjectNode();
        result.set("key", serialize(keyOut, record.topic(), record.keySchema(), record.key()));
        result.set("value", serialize(valueOut, record.topic(), record.valueSchema(), record.value()));
        result.put("topic", record.topic());
        result.put("partition", record.kafkaPartition());
        if (record.timestamp() == null) {
            result.putNull("timestamp");
        } else {
            result.put("timestamp", record.timestamp());
        }
        ArrayNode outHeaders = result.putArray("headers");
        for (Iterator<Header> it = record.headers().iterator(); it.hasNext(); ) {
            Header h = it.next();
            ArrayNode pair = outHeaders.addArray();
            pair.add(h.key());
            byte[] data = headerOut.fromConnectHeader(record.topic(), h.key(), h.schema(), h.value());
            pair.add(data == null ? null : Base64.getEncoder().encodeToString(data));
        }
        return result;
    }

    static JsonNode serialize(JsonConverter conv, String topic, Schema schema, Object value) {
        try {
            byte[] data = conv.fromConnectData(topic, schema, value);
            return data == null ? JSON.nullNode() : JSON.readTree(data);
        } catch (Exception e) {
            ObjectNode failure = JSON.createObjectNode();
            failure.put("serialize_error", e.getClass().getName());
            failure.put("message", String.valueOf(e.getMessage()));
            return failure;
        }
    }
}
