/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_dispatch_combine_invalid.c: every kind of invalid input to Dispatch V3 and Combine V2 on
 * three thread ranks. One rank (or all, for rules about the whole call) gets a broken input; every rank
 * must return MM_ERR_INVALID_ARGUMENT with the same message naming the rule, nothing may be written
 * to any output (they hold a sentinel), nobody may hang, and a valid call on the same workspaces must
 * work afterwards. Local-only rules (no communicator) are also checked through the shape queries. */
#include "test_dispatch_combine_scenarios.h"
#include "testlib.h"

enum { BAD_RANK = 1, ALL = -1 };

typedef struct bad_case {
    const char *expect; /* substring of the message every rank must get */
    int who;            /* rank that gets the broken input, or ALL */
    int combine;        /* 0: break dispatch; 1: run dispatch fine, break combine */
    int id;
} bad_case;

enum {
    C_ID_RANGE,
    C_ID_DUP,
    C_MASK_ORDER,
    C_MASK_SHAPE,
    C_QUANT1,
    C_COMM_ALG,
    C_NOT_DIVISIBLE,
    C_ATTR_MISMATCH,
    C_SCALES_NO_QUANT,
    C_X_DTYPE,
    C_EXPAND_SMALL,
    C_ELASTIC_TABLE,
    C_ELASTIC_ALIVE,
    C_TP_MULTI_EXPERT,
    C_GLOBAL_BS,
    C_BS_MISMATCH,
    C_SHARED_MULTIPLE,
    C_H_MISMATCH,
    C_SHARD_TYPE,
    C_EP_COUNTS,
    C_ASSIST,
    C_EXPAND_ROWS,
    C_RESERVED_INPUT,
    C_OUT_DTYPE,
    C_ORI_MISSING,
    C_ALPHA_MISSING,
    C_ALPHA_FORMS,
    C_EPS,
    C_TP_COUNTS,
    C_GAMMA,
    C_WRONG_OP,
    C_COUNT
};

static const bad_case cases[C_COUNT] = {
    {"expert_ids[0][0] = 999 is outside [0, 3)", BAD_RANK, 0, C_ID_RANGE},
    {"repeats expert_ids[0][0]", BAD_RANK, 0, C_ID_DUP},
    {"a 1-D mask has all true entries first", BAD_RANK, 0, C_MASK_ORDER},
    {"x_active_mask must have shape", BAD_RANK, 0, C_MASK_SHAPE},
    {"quant_mode = 1 is not supported", BAD_RANK, 0, C_QUANT1},
    {"comm_alg = \"fullmesh\" is reserved", BAD_RANK, 0, C_COMM_ALG},
    {"moe_expert_num = 5 is not divisible", ALL, 0, C_NOT_DIVISIBLE},
    {"attribute zero_expert_num = 0 on rank 0 but 1 on rank 1", BAD_RANK, 0, C_ATTR_MISMATCH},
    {"scales (smoothing factors) are given but quant_mode = 0", BAD_RANK, 0, C_SCALES_NO_QUANT},
    {"x has dtype f32, expected bf16 or f16", BAD_RANK, 0, C_X_DTYPE},
    {"expand_x.shape[0] = 1 must be >=", BAD_RANK, 0, C_EXPAND_SMALL},
    {"does not invert table 1", ALL, 0, C_ELASTIC_TABLE},
    {"still counts it alive", ALL, 0, C_ELASTIC_ALIVE},
    {"tp_world_size = 2 needs one expert per routed-expert rank", ALL, 0, C_TP_MULTI_EXPERT},
    {"global_bs = 15 is not max Bs", ALL, 0, C_GLOBAL_BS},
    {"with global_bs = 0 every rank has the same Bs", BAD_RANK, 0, C_BS_MISMATCH},
    {"must be a positive multiple of shared_expert_num = 2", ALL, 0, C_SHARED_MULTIPLE},
    {"H (hidden size) is 32 on rank 0 but 16 on rank 1", BAD_RANK, 0, C_H_MISMATCH},
    {"expert_shard_type = 1 is not supported", BAD_RANK, 0, C_SHARD_TYPE},
    {"is below the entry before it (it is an inclusive prefix sum)", BAD_RANK, 1, C_EP_COUNTS},
    {"assist_info_for_combine[0] = (", BAD_RANK, 1, C_ASSIST},
    {"expand_x has shape", BAD_RANK, 1, C_EXPAND_ROWS},
    {"group_list is a reserved input", BAD_RANK, 1, C_RESERVED_INPUT},
    {"out_dtype = 1 is reserved", BAD_RANK, 1, C_OUT_DTYPE},
    {"ori_x is required when copy_expert_num (1)", ALL, 1, C_ORI_MISSING},
    {"const_expert_alpha_1 is required", ALL, 1, C_ALPHA_MISSING},
    {"must have the same form", ALL, 1, C_ALPHA_FORMS},
    {"norm_eps = nan must be finite", BAD_RANK, 1, C_EPS},
    {"tp_send_counts has 1 entries, expected tp_world_size = 0", BAD_RANK, 1, C_TP_COUNTS},
    {"gamma has 31 entries, expected H = 32", BAD_RANK, 1, C_GAMMA},
    {"rank 0 called dispatch_v3 but rank 1 called combine_add_rms_norm_v2", BAD_RANK, 0, C_WRONG_OP},
};

#define NR  3
#define NBS 4
#define NH  32
#define NK  2

typedef struct rank_state {
    mm_status status;
    char message[MM_ERROR_MESSAGE_MAX];
    int untouched;
    int valid_after; /* a valid call afterwards succeeded */
} rank_state;

typedef struct case_run {
    const bad_case *bc;
    dct_world *w;
    rank_state st[NR];
} case_run;

static int all_bytes(const void *p, size_t n, uint8_t v) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != v) return 0;
    return 1;
}

/* C_WRONG_OP: the broken rank calls Combine, with a locally valid empty handoff, while its peers call
 * Dispatch; the two must not pair their different collectives. */
static mm_status combine_instead(mm_dc_workspace *ws, const mm_tensor *ids, const mm_dc_attrs *a,
                                 const dct_rank_data *rd, mm_error *e) {
    static uint16_t none[NH], gamma[NH], y[NBS * NH], xo[NBS * NH];
    static int32_t no_rows[3], zero_counts[NR];
    static float wts[NBS * NK], rstd[NBS];
    mm_tensor cx = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){0, NH}, none);
    mm_tensor cas = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){0, 3}, no_rows);
    mm_tensor cep = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){NR}, zero_counts);
    mm_tensor cw = mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){NBS, NK}, wts);
    mm_tensor cres = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){NBS, 1, NH}, rd->residual);
    mm_tensor cg = mm_tensor_make(MM_DTYPE_BF16, 1, (int64_t[]){NH}, gamma);
    mm_tensor ty = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){NBS, 1, NH}, y);
    mm_tensor tx = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){NBS, 1, NH}, xo);
    mm_tensor tr = mm_tensor_make(MM_DTYPE_F32, 1, (int64_t[]){NBS}, rstd);
    mm_combine_v2_inputs cin;
    memset(&cin, 0, sizeof cin);
    cin.expand_x = &cx, cin.expert_ids = ids, cin.assist_info_for_combine = &cas, cin.ep_send_counts = &cep;
    cin.expert_scales = &cw, cin.residual_x = &cres, cin.gamma = &cg;
    mm_combine_v2_outputs cout = {&ty, &tr, &tx};
    return mm_combine_v2(ws, &cin, a, &cout, e);
}

static mm_status rank_fn(mm_comm *comm, void *arg, mm_error *err) {
    case_run *cr = arg;
    const bad_case *bc = cr->bc;
    int g = mm_comm_rank(comm), bad = bc->who == ALL || bc->who == g;
    dct_world *w = cr->w;
    dct_rank_data *rd = &w->rd[g];
    mm_comm_set_timeout(comm, 10.0, NULL);
    mm_dc_workspace *ws = NULL;
    mm_status st = mm_dc_workspace_create(comm, &ws, err);
    if (st) return st;
    mm_dc_attrs a = dct_attrs(w, g);
    int32_t ids[NBS * NK];
    memcpy(ids, rd->ids, sizeof ids);
    uint8_t mask[NBS * NK + 1] = {1, 1, 1, 0};
    float xf[NBS * NH] = {0};
    int32_t elastic[4 + 2 * NR] = {1, 2, 0, 2, 0, -1, 1, 0, 2, -1};
    int64_t bs = NBS, h = NH;
    mm_tensor tx = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){NBS, NH}, rd->x);
    mm_tensor tid = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){NBS, NK}, ids);
    mm_tensor tmask = mm_tensor_make(MM_DTYPE_BOOL, 1, (int64_t[]){NBS}, mask);
    mm_tensor tsc = mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){3, NH}, w->smooth);
    mm_tensor tel = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){4 + 2 * NR}, elastic);
    mm_dispatch_v3_inputs din = {&tx, &tid, NULL, NULL, NULL};
    int64_t A = (int64_t)NBS * NR * NK;
    uint16_t ex[NBS * NR * NK * NH];
    int32_t assist[NBS * NR * NK * 3], epc[NR * 2], tpc[2];
    int64_t etn[2];
    float dyn[NBS * NR * NK];
    mm_tensor tex = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){A, NH}, ex);
    mm_tensor tas = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){A, 3}, assist);
    mm_tensor tet = mm_tensor_make(MM_DTYPE_I64, 1, (int64_t[]){1}, etn);
    mm_tensor tep = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){NR}, epc);
    mm_tensor tdyn = mm_tensor_make(MM_DTYPE_F32, 1, (int64_t[]){A}, dyn);
    mm_dispatch_v3_outputs dout = {&tex, &tdyn, &tas, &tet, &tep, NULL};
    memset(ex, 0xAB, sizeof ex), memset(assist, 0xAB, sizeof assist), memset(epc, 0xAB, sizeof epc);
    memset(etn, 0xAB, sizeof etn);
    if (!bc->combine && bad) {
        switch (bc->id) {
        case C_ID_RANGE: ids[0] = 999; break;
        case C_ID_DUP: ids[1] = ids[0]; break;
        case C_MASK_ORDER: mask[0] = 0, mask[1] = 1, din.x_active_mask = &tmask; break;
        case C_MASK_SHAPE: tmask.shape[0] = NBS - 1, din.x_active_mask = &tmask; break;
        case C_QUANT1: a.quant_mode = 1; break;
        case C_COMM_ALG: a.comm_alg = "fullmesh"; break;
        case C_NOT_DIVISIBLE: a.moe_expert_num = 5; break;
        case C_ATTR_MISMATCH: a.zero_expert_num = 1; break;
        case C_SCALES_NO_QUANT: din.scales = &tsc; break;
        case C_X_DTYPE: tx = mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){NBS, NH}, xf); break;
        case C_EXPAND_SMALL: tex.shape[0] = 1; break;
        case C_ELASTIC_TABLE: elastic[4 + NR] = 2, din.elastic_info = &tel; break;
        case C_ELASTIC_ALIVE: din.elastic_info = &tel; break;
        case C_TP_MULTI_EXPERT: a.tp_world_size = 2, a.moe_expert_num = 6; break;
        case C_GLOBAL_BS: a.global_bs = 15; break;
        case C_BS_MISMATCH: tx.shape[0] = tid.shape[0] = NBS - 1; break;
        case C_SHARED_MULTIPLE:
            a.shared_expert_num = 2, a.shared_expert_rank_num = 1, a.moe_expert_num = 2;
            break;
        case C_H_MISMATCH: tx.shape[1] = tex.shape[1] = 16; break;
        case C_SHARD_TYPE: a.expert_shard_type = 1; break;
        }
    }
    mm_error e = {MM_OK, ""};
    int64_t rows = -1;
    st = !bc->combine && bad && bc->id == C_WRONG_OP ? combine_instead(ws, &tid, &a, rd, &e)
                                                     : mm_dispatch_v3(ws, &din, &a, &dout, &rows, &e);
    rank_state *rs = &cr->st[g];
    if (!bc->combine) {
        rs->status = st;
        snprintf(rs->message, sizeof rs->message, "%s", e.message);
        rs->untouched = all_bytes(ex, sizeof ex, 0xAB) && all_bytes(assist, sizeof assist, 0xAB) &&
                        all_bytes(epc, sizeof epc, 0xAB) && all_bytes(etn, sizeof etn, 0xAB);
        (void)bs, (void)h;
    } else if (st) {
        snprintf(err->message, sizeof err->message, "rank %d: valid dispatch failed: %.400s", g, e.message);
        err->status = st;
        mm_dc_workspace_free(ws, NULL);
        return st;
    }
    if (bc->combine) {
        /* identity FFN: the rows are BF16 already */
        float wts[NBS * NK], nan_eps = NAN;
        for (int i = 0; i < NBS * NK; i++) wts[i] = 0.5f;
        uint16_t y[NBS * NH], xo[NBS * NH], gamma[NH];
        float rstd[NBS], alpha[4] = {1, 1, 1, 1};
        uint16_t cv[NH] = {0};
        for (int i = 0; i < NH; i++) gamma[i] = 0x3F80;
        mm_tensor cx = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){rows, NH}, ex);
        mm_tensor cas = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){rows, 3}, assist);
        mm_tensor cw = mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){NBS, NK}, wts);
        mm_tensor cres = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){NBS, 1, NH}, rd->residual);
        mm_tensor cg = mm_tensor_make(MM_DTYPE_BF16, 1, (int64_t[]){NH}, gamma);
        mm_tensor cori = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){NBS, NH}, rd->ori);
        mm_tensor ca1 = mm_tensor_make(MM_DTYPE_F32, 1, (int64_t[]){1}, alpha);
        mm_tensor ca2 = mm_tensor_make(MM_DTYPE_BF16, 1, (int64_t[]){1}, alpha);
        mm_tensor cvt = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){1, NH}, cv);
        mm_tensor ctp = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){1}, tpc);
        mm_tensor ty = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){NBS, 1, NH}, y);
        mm_tensor tx2 = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){NBS, 1, NH}, xo);
        mm_tensor trs = mm_tensor_make(MM_DTYPE_F32, 1, (int64_t[]){NBS}, rstd);
        mm_combine_v2_inputs cin = {.expand_x = &cx,
                                    .expert_ids = &tid,
                                    .assist_info_for_combine = &cas,
                                    .ep_send_counts = &tep,
                                    .expert_scales = &cw,
                                    .residual_x = &cres,
                                    .gamma = &cg};
        mm_combine_v2_outputs cout = {&ty, &trs, &tx2};
        int32_t saved_epc[NR];
        memcpy(saved_epc, epc, sizeof epc[0] * NR);
        int32_t saved_assist = assist[1];
        if (bad) {
            switch (bc->id) {
            case C_EP_COUNTS: epc[1] = epc[0] - 1, epc[0] = epc[0] ? epc[0] : 1; break;
            case C_ASSIST: assist[1] = 999; break;
            case C_EXPAND_ROWS: cx.shape[0] = rows - 1; break;
            case C_RESERVED_INPUT: cin.group_list = &tep; break;
            case C_OUT_DTYPE: a.out_dtype = 1; break;
            case C_ORI_MISSING: a.copy_expert_num = 1; break;
            case C_ALPHA_MISSING: a.const_expert_num = 1, cin.ori_x = &cori; break;
            case C_ALPHA_FORMS:
                a.const_expert_num = 1, cin.ori_x = &cori, cin.const_expert_alpha_1 = &ca1;
                cin.const_expert_alpha_2 = &ca2, cin.const_expert_v = &cvt;
                break;
            case C_EPS: a.norm_eps = nan_eps; break;
            case C_TP_COUNTS: tpc[0] = (int32_t)rows, cin.tp_send_counts = &ctp; break;
            case C_GAMMA: cg.shape[0] = NH - 1; break;
            }
        }
        memset(y, 0xAB, sizeof y), memset(xo, 0xAB, sizeof xo), memset(rstd, 0xAB, sizeof rstd);
        st = mm_combine_v2(ws, &cin, &a, &cout, &e);
        rs->status = st;
        snprintf(rs->message, sizeof rs->message, "%s", e.message);
        rs->untouched = all_bytes(y, sizeof y, 0xAB) && all_bytes(xo, sizeof xo, 0xAB) &&
                        all_bytes(rstd, sizeof rstd, 0xAB);
        /* then a valid combine on the same workspace */
        memcpy(epc, saved_epc, sizeof epc[0] * NR);
        a = dct_attrs(w, g);
        assist[1] = saved_assist;
        cx.shape[0] = rows;
        cg.shape[0] = NH;
        memset(&cin, 0, sizeof cin);
        cin.expand_x = &cx, cin.expert_ids = &tid, cin.assist_info_for_combine = &cas,
        cin.ep_send_counts = &tep;
        cin.expert_scales = &cw, cin.residual_x = &cres, cin.gamma = &cg;
        rs->valid_after = mm_combine_v2(ws, &cin, &a, &cout, &e) == MM_OK;
    } else {
        /* a valid dispatch on the same workspace */
        mm_dc_attrs ok = dct_attrs(w, g);
        memcpy(ids, rd->ids, sizeof ids);
        tx = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){NBS, NH}, rd->x);
        tid.shape[0] = NBS;
        tex.shape[0] = A, tex.shape[1] = NH;
        mm_dispatch_v3_inputs good = {&tx, &tid, NULL, NULL, NULL};
        rs->valid_after = mm_dispatch_v3(ws, &good, &ok, &dout, &rows, &e) == MM_OK;
    }
    mm_dc_workspace_free(ws, NULL);
    return MM_OK;
}

static void local_rules(void) {
    /* Rules a rank finds without its peers, through the shape queries. */
    int32_t ids[2] = {0, 1};
    uint16_t x[2 * 8] = {0};
    mm_tensor tx = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){1, 8}, x);
    mm_tensor tid = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){1, 2}, ids);
    int32_t el[4 + 2 * 2] = {1, 1, 0, 1, 0, -1, 0, -1};
    mm_tensor tel = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){8}, el);
    mm_dispatch_v3_inputs in = {&tx, &tid, NULL, NULL, &tel};
    mm_dc_attrs a = mm_dc_default_attrs();
    a.ep_world_size = 2, a.moe_expert_num = 2, a.tp_world_size = 2;
    mm_dispatch_v3_shapes sh;
    mm_error e = {MM_OK, ""};
    CHECK_STATUS(mm_dispatch_v3_plan(&in, &a, &sh, &e), MM_ERR_INVALID_ARGUMENT, &e);
    CHECK_STR_CONTAINS(e.message, "not allowed with tp_world_size = 2");
    a.tp_world_size = 0;
    tid.shape[1] = 1;                                         /* one routed expert survives: K = 1 */
    CHECK_OK(mm_dispatch_v3_shapes_of(&in, &a, &sh, &e), &e); /* the deprecated alias of _plan */
    CHECK_EQ_INT(sh.max_rows, 1 * 1 * 1);                     /* one survivor, Bs 1, one expert per rank */
    el[3] = 2;
    CHECK_STATUS(mm_dispatch_v3_plan(&in, &a, &sh, &e), MM_ERR_INVALID_ARGUMENT, &e);
    CHECK_STR_CONTAINS(e.message, "elastic_info[3] = 2");
    el[3] = 1, el[5] = 0;
    CHECK_STATUS(mm_dispatch_v3_plan(&in, &a, &sh, &e), MM_ERR_INVALID_ARGUMENT, &e);
    CHECK_STR_CONTAINS(e.message, "keeps 2 ranks but elastic_info[1] = 1");
    el[5] = -1, el[0] = 2;
    CHECK_STATUS(mm_dispatch_v3_plan(&in, &a, &sh, &e), MM_ERR_INVALID_ARGUMENT, &e);
    CHECK_STR_CONTAINS(e.message, "elastic_info[0] = 2 is not 0 or 1");
    el[0] = 0; /* scale-in off: the tables are not used */
    tid.shape[1] = 2;
    CHECK_OK(mm_dispatch_v3_plan(&in, &a, &sh, &e), &e);
    CHECK_EQ_INT(sh.max_rows, 1 * 2 * 1);
    ids[1] = 0; /* ids may repeat special experts but not routed ones */
    CHECK_STATUS(mm_dispatch_v3_plan(&in, &a, &sh, &e), MM_ERR_INVALID_ARGUMENT, &e);
    a.zero_expert_num = 1, ids[0] = ids[1] = 2;
    CHECK_OK(mm_dispatch_v3_plan(&in, &a, &sh, &e), &e);
}

int main(void) {
    local_rules();
    dct_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.R = NR, cfg.M = NR, cfg.bs = NBS, cfg.h = NH, cfg.k = NK, cfg.eps = 1e-6f, cfg.seed = 11;
    dct_world w;
    dct_world_make(&w, &cfg);
    for (int c = 0; c < C_COUNT; c++) {
        case_run cr;
        memset(&cr, 0, sizeof cr);
        cr.bc = &cases[c];
        cr.w = &w;
        mm_error err = {MM_OK, ""};
        mm_status st = mm_comm_run_threads(NR, rank_fn, &cr, NULL, NULL, &err);
        CHECK_OK(st, &err);
        for (int g = 0; g < NR; g++) {
            if (cr.st[g].status != MM_ERR_INVALID_ARGUMENT || !strstr(cr.st[g].message, cases[c].expect))
                fprintf(stderr, "case %d rank %d: %s \"%s\" (wanted \"%s\")\n", c, g,
                        mm_status_name(cr.st[g].status), cr.st[g].message, cases[c].expect);
            CHECK_EQ_INT(cr.st[g].status, MM_ERR_INVALID_ARGUMENT);
            CHECK_STR_CONTAINS(cr.st[g].message, cases[c].expect);
            CHECK_EQ_INT(strcmp(cr.st[g].message, cr.st[0].message), 0); /* the same message everywhere */
            CHECK(cr.st[g].untouched);
            CHECK(cr.st[g].valid_after);
        }
    }
    dct_world_free(&w);
    return mm_test_finish("test_dispatch_combine_invalid");
}
