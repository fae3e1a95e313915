/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/dc_world.c: building the seeded Dispatch V3 / Combine V2 world of dc_world.h. Survivors of an
 * elastic world keep their order (new rank = position among survivors), so the survivors among the
 * shared-expert ranks stay the first ranks, and each rank keeps its local experts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/demo_data.h"
#include "common/cli_util.h"
#include "common/dc_world.h"
#include "megamoe/formats.h"

cli_dc_opts cli_dc_default_opts(void) {
    cli_dc_opts o;
    memset(&o, 0, sizeof o);
    o.ranks = 4, o.experts = 0, o.tokens = 8, o.hidden = 256, o.topk = 0, o.ent_type = 1, o.eps = 1e-6,
    o.seed = 1;
    return o;
}

int cli_dc_parse_removed(const char *command, const char *option, const char *text, void *opts) {
    cli_dc_opts *o = opts;
    const char *p = text;
    while (*p) {
        char *end = NULL;
        long r = strtol(p, &end, 10);
        if (end == p || r < 0 || r >= MM_COMM_MAX_RANKS) {
            cli_error(command, "%s '%s': expected comma-separated ranks in [0, %d)", option, text,
                      MM_COMM_MAX_RANKS);
            return -1;
        }
        if (!o->removed[r]) o->n_removed++;
        o->removed[r] = 1;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
            cli_error(command, "%s '%s': expected comma-separated ranks", option, text);
            return -1;
        }
    }
    return 0;
}

int cli_dc_parse_mask(const char *command, const char *option, const char *text, void *mask) {
    static const char *const kinds[] = {"none", "1d", "2d"};
    for (int64_t k = 0; k < 3; k++)
        if (strcmp(text, kinds[k]) == 0) {
            *(int64_t *)mask = k;
            return 0;
        }
    cli_error(command, "%s '%s': expected none, 1d or 2d", option, text);
    return -1;
}

static float uniform(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(cli_rand_u64(s) >> 11) * (1.0 / 9007199254740992.0));
}

void cli_dc_world_free(cli_dc_world *w) {
    for (int g = 0; g < MM_COMM_MAX_RANKS; g++) {
        cli_dc_rank *r = &w->rank[g];
        free(r->x), free(r->residual), free(r->ori), free(r->shared_x), free(r->ids), free(r->mask),
            free(r->weights);
    }
    free(w->elastic), free(w->smooth), free(w->gamma), free(w->alpha1), free(w->alpha2), free(w->const_v);
    memset(w, 0, sizeof *w);
}

static int gen_rank(cli_dc_world *w, int64_t g) {
    const cli_dc_opts *o = &w->o;
    uint64_t s = o->seed * 1000003u + (uint64_t)g * 7919u + 17;
    cli_dc_rank *r = &w->rank[g];
    r->bs = o->vary_bs ? o->tokens - (g % 3 == 2 ? o->tokens / 2 : g % 3) : o->tokens;
    if (r->bs < 0) r->bs = 0;
    size_t bh = (size_t)r->bs * (size_t)o->hidden, bk = (size_t)r->bs * (size_t)o->topk;
    r->x = malloc(bh * 2 + 2), r->residual = malloc(bh * 2 + 2), r->ori = malloc(bh * 2 + 2);
    r->shared_x = malloc(bh * 2 + 2), r->ids = malloc(bk * 4 + 4), r->mask = malloc(bk + 1);
    r->weights = malloc(bk * 4 + 4);
    if (!r->x || !r->residual || !r->ori || !r->shared_x || !r->ids || !r->mask || !r->weights) return -1;
    for (size_t j = 0; j < bh; j++) {
        r->x[j] = mm_f32_to_bf16(uniform(&s, -2, 2));
        r->residual[j] = mm_f32_to_bf16(uniform(&s, -1, 1));
        r->ori[j] = mm_f32_to_bf16(uniform(&s, -1, 1));
        r->shared_x[j] = mm_f32_to_bf16(uniform(&s, -0.5f, 0.5f));
    }
    int64_t special = o->zero + o->copy + o->konst;
    for (int64_t i = 0; i < r->bs; i++)
        for (int64_t k = 0; k < o->topk; k++) {
            int64_t e;
            for (;;) {
                if (special && cli_rand_u64(&s) % 4 == 0) {
                    e = w->M_eff + (int64_t)(cli_rand_u64(&s) % (uint64_t)special);
                    break;
                }
                e = (int64_t)(cli_rand_u64(&s) % (uint64_t)w->M_eff);
                int dup = 0;
                for (int64_t k2 = 0; k2 < k; k2++) dup |= r->ids[i * o->topk + k2] == e;
                if (!dup) break;
            }
            r->ids[i * o->topk + k] = (int32_t)e;
            r->weights[i * o->topk + k] = uniform(&s, 0.05f, 1.0f);
        }
    if (o->mask == 1) {
        int64_t active = r->bs - (int64_t)(cli_rand_u64(&s) % (uint64_t)(r->bs / 2 + 1));
        for (int64_t i = 0; i < r->bs; i++) r->mask[i] = i < active;
    } else {
        for (size_t j = 0; j < bk; j++) r->mask[j] = cli_rand_u64(&s) % 4 != 0;
    }
    return 0;
}

/* A failed allocation is said, not only signalled by the exit status. */
static int out_of_memory(const char *cmd, const char *what) {
    cli_error(cmd, "out of memory generating %s", what);
    return MM_CLI_EXIT_FAILURE;
}

int cli_dc_world_make(const char *cmd, const cli_dc_opts *opts, cli_dc_world *w) {
    memset(w, 0, sizeof *w);
    w->o = *opts;
    cli_dc_opts *o = &w->o;
    w->tpw = o->tp > 1 ? o->tp : 1;
    w->nranks = o->ranks * w->tpw;
    if (w->nranks > MM_COMM_MAX_RANKS) {
        cli_error(cmd, "--ranks x --tp = %lld exceeds %d", (long long)w->nranks, MM_COMM_MAX_RANKS);
        return MM_CLI_EXIT_USAGE;
    }
    if (o->shared_ranks >= o->ranks || (o->shared_experts == 0) != (o->shared_ranks == 0) ||
        (o->shared_experts && o->shared_ranks % o->shared_experts)) {
        cli_error(
            cmd, "--shared-ranks %lld must be below --ranks and a positive multiple of --shared-experts %lld",
            (long long)o->shared_ranks, (long long)o->shared_experts);
        return MM_CLI_EXIT_USAGE;
    }
    for (int64_t r = o->ranks; r < MM_COMM_MAX_RANKS; r++)
        if (o->removed[r]) {
            cli_error(cmd, "--remove %lld is not an EP rank (--ranks %lld)", (long long)r,
                      (long long)o->ranks);
            return MM_CLI_EXIT_USAGE;
        }
    if (!o->experts) o->experts = o->ranks - o->shared_ranks;
    if (o->experts % (o->ranks - o->shared_ranks)) {
        cli_error(cmd, "--experts %lld is not a multiple of the %lld routed-expert ranks",
                  (long long)o->experts, (long long)(o->ranks - o->shared_ranks));
        return MM_CLI_EXIT_USAGE;
    }
    w->L = o->experts / (o->ranks - o->shared_ranks);
    w->R_eff = o->ranks, w->sh_eff = o->shared_ranks;
    if (o->n_removed) {
        int64_t n = 0, sh = 0;
        w->elastic = malloc((size_t)(4 + 2 * o->ranks) * 4);
        if (!w->elastic) return out_of_memory(cmd, "the elastic_info table");
        for (int64_t r = 0; r < o->ranks; r++) w->elastic[4 + o->ranks + r] = -1;
        for (int64_t r = 0; r < o->ranks; r++) {
            w->elastic[4 + r] = o->removed[r] ? -1 : (int32_t)n;
            if (!o->removed[r]) {
                w->elastic[4 + o->ranks + n++] = (int32_t)r;
                sh += r < o->shared_ranks;
            }
        }
        if (n == 0 || n - sh < 1 || (o->shared_experts && sh == 0) || o->tp > 1) {
            cli_error(cmd, "--remove leaves no routed-expert rank%s",
                      o->tp > 1 ? " (or is used with --tp 2)" : "");
            return MM_CLI_EXIT_USAGE;
        }
        w->R_eff = n, w->sh_eff = sh;
        w->elastic[0] = 1, w->elastic[1] = (int32_t)n, w->elastic[2] = (int32_t)sh;
        w->elastic[3] = (int32_t)(w->L * (n - sh));
    }
    w->M_eff = w->L * (w->R_eff - w->sh_eff);
    if (!o->topk) o->topk = w->M_eff < 4 ? w->M_eff : 4;
    if (o->topk > w->M_eff + o->zero + o->copy + o->konst) {
        cli_error(cmd, "--topk %lld exceeds the %lld experts", (long long)o->topk,
                  (long long)(w->M_eff + o->zero + o->copy + o->konst));
        return MM_CLI_EXIT_USAGE;
    }
    uint64_t s = o->seed * 31 + 5;
    size_t h = (size_t)o->hidden, nc = (size_t)(o->konst ? o->konst : 1);
    w->smooth = malloc((size_t)(o->shared_experts + o->experts) * h * 4);
    w->gamma = malloc(h * 2);
    w->alpha1 = malloc(nc * h * 4), w->alpha2 = malloc(nc * h * 4);
    w->const_v = malloc(nc * h * 2);
    if (!w->smooth || !w->gamma || !w->alpha1 || !w->alpha2 || !w->const_v)
        return out_of_memory(cmd, "the smoothing scales, gamma and const-expert tensors");
    for (size_t j = 0; j < (size_t)(o->shared_experts + o->experts) * h; j++)
        w->smooth[j] = uniform(&s, 0.5f, 1.5f);
    for (size_t j = 0; j < h; j++) w->gamma[j] = mm_f32_to_bf16(uniform(&s, 0.5f, 1.5f));
    for (size_t j = 0; j < nc * h; j++) {
        w->alpha1[j] = uniform(&s, -1, 1) * (o->alpha_2d ? 0.05f : 1.0f);
        w->alpha2[j] = uniform(&s, -1, 1) * (o->alpha_2d ? 0.05f : 1.0f);
        w->const_v[j] = mm_f32_to_bf16(uniform(&s, -1, 1));
    }
    for (int64_t g = 0; g < w->nranks; g++) {
        w->rank[g].alive = !o->removed[g / w->tpw];
        if (gen_rank(w, g)) return out_of_memory(cmd, "a rank's tokens (lower --tokens or --hidden)");
    }
    return 0;
}

mm_dc_attrs cli_dc_attrs(const cli_dc_world *w, int64_t g) {
    const cli_dc_opts *o = &w->o;
    mm_dc_attrs a = mm_dc_default_attrs();
    a.ep_world_size = o->ranks, a.ep_rank_id = g / w->tpw;
    a.tp_world_size = o->tp, a.tp_rank_id = g % w->tpw;
    a.moe_expert_num = o->experts, a.shared_expert_num = o->shared_experts;
    a.shared_expert_rank_num = o->shared_ranks, a.quant_mode = o->quant;
    a.expert_token_nums_type = o->ent_type;
    a.zero_expert_num = o->zero, a.copy_expert_num = o->copy, a.const_expert_num = o->konst;
    a.norm_eps = (float)o->eps;
    if (o->vary_bs) {
        int64_t mx = 0;
        for (int64_t r = 0; r < w->nranks; r++)
            if (w->rank[r].alive && w->rank[r].bs > mx) mx = w->rank[r].bs;
        a.global_bs = mx * o->ranks;
    }
    return a;
}

mm_dispatch_v3_inputs cli_dc_dispatch_inputs(const cli_dc_world *w, int64_t g, cli_dc_tensors *t) {
    const cli_dc_opts *o = &w->o;
    const cli_dc_rank *r = &w->rank[g];
    t->x = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){r->bs, o->hidden}, r->x);
    t->ids = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){r->bs, o->topk}, r->ids);
    t->scales =
        mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){o->shared_experts + o->experts, o->hidden}, w->smooth);
    t->mask = o->mask == 1 ? mm_tensor_make(MM_DTYPE_BOOL, 1, (int64_t[]){r->bs}, r->mask)
                           : mm_tensor_make(MM_DTYPE_BOOL, 2, (int64_t[]){r->bs, o->topk}, r->mask);
    t->elastic = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){4 + 2 * o->ranks}, w->elastic);
    mm_dispatch_v3_inputs in = {&t->x, &t->ids, o->smooth && o->quant == 2 ? &t->scales : NULL,
                                o->mask ? &t->mask : NULL, w->elastic ? &t->elastic : NULL};
    return in;
}

void cli_dc_combine_inputs(const cli_dc_world *w, int64_t g, const cli_dc_dispatch_out *d, void *expert_out,
                           cli_dc_tensors *t, mm_combine_v2_inputs *in) {
    const cli_dc_opts *o = &w->o;
    const cli_dc_rank *r = &w->rank[g];
    mm_dispatch_v3_inputs di = cli_dc_dispatch_inputs(w, g, t);
    int64_t H = o->hidden, N = o->konst;
    t->weights = mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){r->bs, o->topk}, r->weights);
    t->residual = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){r->bs, 1, H}, r->residual);
    t->gamma = mm_tensor_make(MM_DTYPE_BF16, 1, (int64_t[]){H}, w->gamma);
    t->shared_x = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){r->bs, H}, r->shared_x);
    t->ori = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){r->bs, H}, r->ori);
    t->a1 = o->alpha_2d ? mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){N, H}, w->alpha1)
                        : mm_tensor_make(MM_DTYPE_F32, 1, (int64_t[]){N}, w->alpha1);
    t->a2 = o->alpha_2d ? mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){N, H}, w->alpha2)
                        : mm_tensor_make(MM_DTYPE_F32, 1, (int64_t[]){N}, w->alpha2);
    t->v = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){N, H}, w->const_v);
    memset(in, 0, sizeof *in);
    in->expert_ids = di.expert_ids;
    in->x_active_mask = di.x_active_mask;
    in->elastic_info = di.elastic_info;
    in->expert_scales = &t->weights;
    in->residual_x = &t->residual;
    in->gamma = &t->gamma;
    in->shared_expert_x = o->shared_x ? &t->shared_x : NULL;
    in->ori_x = o->copy + o->konst ? &t->ori : NULL;
    in->const_expert_alpha_1 = N ? &t->a1 : NULL;
    in->const_expert_alpha_2 = N ? &t->a2 : NULL;
    in->const_expert_v = N ? &t->v : NULL;
    /* the hand-off */
    t->expand_x = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){d->rows, w->o.hidden}, expert_out);
    t->assist = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){d->rows, 3}, d->assist);
    t->ep_counts = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){d->n_ep}, d->ep_counts);
    t->tp_counts = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){w->o.tp}, (void *)d->tp_counts);
    in->expand_x = &t->expand_x, in->assist_info_for_combine = &t->assist, in->ep_send_counts = &t->ep_counts;
    in->tp_send_counts = w->o.tp ? &t->tp_counts : NULL;
}

mm_combine_v2_outputs cli_dc_combine_outputs(const cli_dc_world *w, int64_t g, uint16_t *y, uint16_t *x,
                                             float *rstd, cli_dc_tensors *t) {
    int64_t bs = w->rank[g].bs, H = w->o.hidden;
    t->y = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){bs, 1, H}, y);
    t->x_out = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){bs, 1, H}, x);
    t->rstd = mm_tensor_make(MM_DTYPE_F32, 3, (int64_t[]){bs, 1, 1}, rstd);
    return (mm_combine_v2_outputs){&t->y, &t->rstd, &t->x_out};
}

void cli_dc_dispatch_out_free(cli_dc_dispatch_out *d) {
    free(d->expand_x), free(d->dyn), free(d->assist), free(d->ep_counts), free(d->token_nums);
    memset(d, 0, sizeof *d);
}

mm_status cli_dc_set_survivors(mm_comm *comm, const cli_dc_world *w, mm_error *err) {
    if (!w->elastic) return MM_OK;
    int alive[MM_COMM_MAX_RANKS], n = 0;
    for (int r = 0; r < w->nranks; r++)
        if (w->rank[r].alive) alive[n++] = r;
    return mm_comm_set_survivors(comm, alive, n, err);
}

mm_status cli_dc_dispatch(mm_dc_workspace *ws, const cli_dc_world *w, int64_t g, cli_dc_dispatch_out *d,
                          mm_error *err) {
    cli_dc_tensors t;
    mm_dispatch_v3_inputs in = cli_dc_dispatch_inputs(w, g, &t);
    mm_dc_attrs a = cli_dc_attrs(w, g);
    mm_dispatch_v3_shapes sh;
    mm_status st = mm_dispatch_v3_plan(&in, &a, &sh, err);
    if (st) return st;
    int64_t A = sh.max_rows, H = w->o.hidden;
    d->local_experts = sh.local_expert_num;
    d->n_ep = sh.ep_recv_counts.shape[0];
    size_t eb = w->o.quant == 2 ? 1 : 2;
    if (!d->expand_x) {
        d->expand_x = malloc((size_t)(A + 1) * (size_t)H * eb);
        d->dyn = malloc((size_t)(A + 1) * 4);
        d->assist = malloc((size_t)(A + 1) * 12);
        d->ep_counts = malloc((size_t)d->n_ep * 4);
        d->token_nums = malloc((size_t)d->local_experts * 8);
    }
    if (!d->expand_x || !d->dyn || !d->assist || !d->ep_counts || !d->token_nums) {
        return cli_fail(err, MM_ERR_OUT_OF_MEMORY, "dispatch outputs: out of memory");
    }
    mm_tensor ex = sh.expand_x, dyn = sh.dynamic_scales, as = sh.assist_info_for_combine;
    mm_tensor etn = sh.expert_token_nums, ep = sh.ep_recv_counts, tp = sh.tp_recv_counts;
    ex.data = d->expand_x, dyn.data = d->dyn, as.data = d->assist, etn.data = d->token_nums;
    ep.data = d->ep_counts, tp.data = d->tp_counts;
    mm_dispatch_v3_outputs out = {&ex, &dyn, &as, &etn, &ep, w->o.tp ? &tp : NULL};
    return mm_dispatch_v3(ws, &in, &a, &out, &d->rows, err);
}
