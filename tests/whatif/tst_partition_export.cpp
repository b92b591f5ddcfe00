// Partition exports: Megatron-LM's layout string and uneven-split flags, and
// per-stage module lists, each for a small partition with its exact text.
#include "whatif/PartitionExport.h"

#include <QtTest>

using namespace pipescope;
using namespace pipescope::whatif;

namespace {

Partition parts(std::vector<int> firstLayer) { return Partition{std::move(firstLayer)}; }

CostModel named(std::vector<std::string> names, const std::string& source)
{
    CostModel m;
    for (LayerSource s : {LayerSource::Stages, LayerSource::Count, LayerSource::Model, LayerSource::Trace})
        if (toString(s) == source)
            m.layerSource = s;
    for (auto& n : names)
        m.layers.push_back(LayerCostModel{n, 1, 2, 0.5, 0, 0});
    return m;
}

} // namespace

class TestPartitionExport : public QObject {
    Q_OBJECT
private slots:
    void layoutEven()
    {
        QCOMPARE(megatronLayout(parts({0, 4, 8, 12, 16})), std::string("Et*4|t*4|t*4|t*4,L"));
    }
    void layoutSingleLayerStages()
    {
        QCOMPARE(megatronLayout(parts({0, 1, 3})), std::string("Et|t*2,L"));
        QCOMPARE(megatronLayout(parts({0, 2, 3})), std::string("Et*2|t,L"));
    }
    void layoutInterleavedFollowsMegatronOrder()
    {
        // pp 2, v 2: virtual stages 0..3 sit on ranks 0, 1, 0, 1 as in Megatron.
        const Schedule s = makeSchedule(ScheduleKind::Interleaved1F1B, 2, 2, 4);
        std::string why;
        const auto layout = megatronLayout(parts({0, 3, 5, 7, 8}), s, &why);
        QVERIFY(layout);
        QCOMPARE(*layout, std::string("Et*3|t*2|t*2|t,L"));
        QVERIFY(why.empty());
    }
    void layoutRefusesVShape()
    {
        const Schedule s = makeSchedule(ScheduleKind::ZeroBubbleV, 2, 2, 4);
        std::string why;
        QVERIFY(!megatronLayout(parts({0, 2, 4, 6, 8}), s, &why));
        QCOMPARE(why, std::string("zb-v places virtual stage 2 on rank 1; Megatron-LM's layout puts stage s on rank s mod "
                                  "pp, so it cannot express this placement"));
    }
    void unevenFlags()
    {
        const Schedule s = makeSchedule(ScheduleKind::OneFOneB, 4, 1, 8);
        QCOMPARE(*megatronUnevenFlags(parts({0, 4, 8, 12, 16}), s), std::string());
        QCOMPARE(*megatronUnevenFlags(parts({0, 3, 7, 11, 16}), s),
                 std::string("--decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 5"));
        QCOMPARE(*megatronUnevenFlags(parts({0, 3, 7, 11, 15}), s), std::string("--decoder-first-pipeline-num-layers 3"));
        QCOMPARE(*megatronUnevenFlags(parts({0, 4, 8, 12, 14}), s), std::string("--decoder-last-pipeline-num-layers 2"));
        std::string why;
        QVERIFY(!megatronUnevenFlags(parts({0, 4, 9, 12, 16}), s, &why));
        QCOMPARE(why, std::string("stages 1..2 hold different layer counts, which the flags cannot say; use the layout string"));
    }
    void unevenFlagsTwoStages()
    {
        const Schedule s = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 4);
        QCOMPARE(*megatronUnevenFlags(parts({0, 3, 8}), s),
                 std::string("--decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 5"));
        QCOMPARE(*megatronUnevenFlags(parts({0, 4, 8}), s), std::string());
    }
    void unevenFlagsRefuseChunks()
    {
        const Schedule s = makeSchedule(ScheduleKind::Interleaved1F1B, 2, 2, 4);
        std::string why;
        QVERIFY(!megatronUnevenFlags(parts({0, 2, 4, 6, 8}), s, &why));
        QCOMPARE(why, std::string("the flags describe one chunk per rank; with v 2 use the layout string"));
    }
    void modules()
    {
        const CostModel m = named({"embed.0", "layers.0", "layers.1", "head"}, "trace");
        const auto mods = stageModules(parts({0, 1, 4}), m);
        QCOMPARE(mods.size(), size_t(2));
        QCOMPARE(mods[0], (std::vector<std::string>{"embed.0"}));
        QCOMPARE(mods[1], (std::vector<std::string>{"layers.0", "layers.1", "head"}));
    }
    void modulesRepeatedNamesCarryIndex()
    {
        const CostModel m = named({"decoder", "decoder", "decoder"}, "model");
        const auto mods = stageModules(parts({0, 2, 3}), m);
        QCOMPARE(mods[0], (std::vector<std::string>{"decoder[0]", "decoder[1]"}));
        QCOMPARE(mods[1], (std::vector<std::string>{"decoder[2]"}));
    }
    void modulesUnknownNames()
    {
        QVERIFY(stageModules(parts({0, 1, 2}), named({"layer 0", "layer 1"}, "count")).empty());
    }
    void text()
    {
        const Schedule s = makeSchedule(ScheduleKind::OneFOneB, 2, 1, 4);
        const CostModel m = named({"a", "b", "c"}, "trace");
        QCOMPARE(partitionExportText(parts({0, 1, 3}), s, m),
                 std::string("Megatron-LM\n"
                             "  --pipeline-model-parallel-layout \"Et|t*2,L\"\n"
                             "  --decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 2\n"
                             "\nModules per stage\n"
                             "  stage 0 (rank 0): a\n"
                             "  stage 1 (rank 1): b, c\n"));
        const CostModel counted = named({"layer 0", "layer 1", "layer 2"}, "count");
        QCOMPARE(partitionExportText(parts({0, 1, 3}), s, counted),
                 std::string("Megatron-LM\n"
                             "  --pipeline-model-parallel-layout \"Et|t*2,L\"\n"
                             "  --decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 2\n"
                             "\nModules per stage\n"
                             "  layer names unknown (layers from a layer count); give a model file to name them\n"));
    }
};

QTEST_GUILESS_MAIN(TestPartitionExport)
#include "tst_partition_export.moc"
