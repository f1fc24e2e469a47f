//! The record's commands: ids, elections, in-sync set changes and cleaning.

use super::*;

fn apply_id(r: &mut Record, id: u64, code: &str) -> Outcome {
    r.apply(&Command::ApplyBrokerId {
        cluster_name: "c".into(),
        broker_name: "b".into(),
        broker_id: id,
        register_check_code: code.into(),
    })
}

fn code_of(o: &Outcome) -> Option<ResponseCode> {
    match o {
        Outcome::Refused { code, .. } => Some(ResponseCode(*code)),
        Outcome::Applied(_) => None,
    }
}

fn three_members() -> Record {
    let mut r = Record::default();
    for (id, code) in [(1, "x"), (2, "y"), (3, "z")] {
        assert_eq!(code_of(&apply_id(&mut r, id, code)), None);
    }
    r
}

fn elect(r: &mut Record, epoch: i32, master: Option<u64>) -> Outcome {
    r.apply(&Command::ElectMaster {
        broker_name: "b".into(),
        master_epoch: epoch,
        new_master: master,
    })
}

#[test]
fn ids_start_at_one_and_are_kept_by_their_code() {
    let mut r = Record::default();
    assert_eq!(r.group("b"), None);
    // A new group starts with id 1; asking for another creates nothing.
    assert_eq!(
        code_of(&apply_id(&mut r, 2, "y")),
        Some(ResponseCode::CONTROLLER_BROKER_ID_INVALID)
    );
    assert_eq!(r.group("b"), None);
    assert_eq!(code_of(&apply_id(&mut r, 1, "10.0.0.1:10911;17")), None);
    // Taken by another code: refused; the same broker asking again gets it.
    assert_eq!(
        code_of(&apply_id(&mut r, 1, "y")),
        Some(ResponseCode::CONTROLLER_BROKER_ID_INVALID)
    );
    assert_eq!(code_of(&apply_id(&mut r, 1, "10.0.0.1:10911;17")), None);
    assert_eq!(code_of(&apply_id(&mut r, 2, "y")), None);
    let g = r.group("b").unwrap();
    assert_eq!(g.offered_broker_id(), 3);
    assert_eq!(g.cluster_name, "c");
    assert_eq!(g.master, None);
    // The address is read from the check code.
    assert_eq!(g.members[&1].address, "10.0.0.1:10911");
    // Registering changes the address; an unknown id must apply first.
    let register = |id| Command::RegisterBroker {
        broker_name: "b".into(),
        broker_id: id,
        address: "10.0.0.9:10911".into(),
    };
    assert_eq!(
        code_of(&r.apply(&register(5))),
        Some(ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)
    );
    let Outcome::Applied(Some(g)) = r.apply(&register(1)) else {
        panic!("refused")
    };
    assert_eq!(g.members[&1].address, "10.0.0.9:10911");
}

#[test]
fn an_election_raises_the_epochs_and_resets_the_in_sync_set() {
    let mut r = three_members();
    r.apply(&Command::RegisterBroker {
        broker_name: "b".into(),
        broker_id: 2,
        address: "10.0.0.2:10911".into(),
    });
    let Outcome::Applied(Some(g)) = elect(&mut r, 0, Some(2)) else {
        panic!("election refused")
    };
    assert_eq!(g.master, Some(2));
    assert_eq!(g.master_epoch, 1);
    assert_eq!(g.sync_state_set, BTreeSet::from([2]));
    assert_eq!(g.sync_state_set_epoch, 1);
    assert_eq!(g.master_address(), Some("10.0.0.2:10911"));
    // Decided on a stale epoch: refused, nothing changes.
    let before = r.clone();
    assert_eq!(
        code_of(&elect(&mut r, 0, Some(3))),
        Some(ResponseCode::CONTROLLER_FENCED_MASTER_EPOCH)
    );
    assert_eq!(r, before);
    // No master found: the epoch still moves, the set stays.
    let Outcome::Applied(Some(g)) = elect(&mut r, 1, None) else {
        panic!("refused")
    };
    assert_eq!((g.master, g.master_epoch), (None, 2));
    assert_eq!(g.sync_state_set_epoch, 1);
    assert_eq!(
        code_of(&elect(&mut r, 2, Some(9))),
        Some(ResponseCode::CONTROLLER_BROKER_ID_INVALID)
    );
    r.groups.clear();
    assert_eq!(
        code_of(&elect(&mut r, 0, Some(1))),
        Some(ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)
    );
}

#[test]
fn only_the_current_master_alters_the_set_at_the_current_epochs() {
    let mut r = three_members();
    elect(&mut r, 0, Some(1));
    let alter = |master_id, master_epoch, set_epoch, set: &[u64]| Command::AlterSyncStateSet {
        broker_name: "b".into(),
        master_id,
        master_epoch,
        sync_state_set_epoch: set_epoch,
        new_sync_state_set: set.iter().copied().collect(),
    };
    for (cmd, code) in [
        (
            alter(1, 1, 1, &[1]),
            ResponseCode::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        ),
        (
            alter(2, 1, 1, &[1, 2]),
            ResponseCode::CONTROLLER_INVALID_MASTER,
        ),
        (
            alter(1, 0, 1, &[1, 2]),
            ResponseCode::CONTROLLER_FENCED_MASTER_EPOCH,
        ),
        (
            alter(1, 1, 0, &[1, 2]),
            ResponseCode::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        ),
        (
            alter(1, 1, 1, &[1, 7]),
            ResponseCode::CONTROLLER_INVALID_REPLICAS,
        ),
        (
            alter(1, 1, 1, &[2, 3]),
            ResponseCode::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        ),
    ] {
        assert_eq!(code_of(&r.apply(&cmd)), Some(code), "{cmd:?}");
    }
    let Outcome::Applied(Some(g)) = r.apply(&alter(1, 1, 1, &[1, 2, 3])) else {
        panic!("refused")
    };
    assert_eq!(g.sync_state_set, BTreeSet::from([1, 2, 3]));
    assert_eq!(g.sync_state_set_epoch, 2);
}

#[test]
fn cleaning_a_group_with_a_master_names_ids_or_cleans_living_brokers() {
    let mut r = three_members();
    elect(&mut r, 0, Some(1));
    let clean = |ids: Option<&[u64]>, clean_living| Command::CleanBrokerData {
        broker_name: "b".into(),
        broker_ids: ids.map(|ids| ids.iter().copied().collect()),
        clean_living,
    };
    assert_eq!(
        code_of(&r.apply(&clean(None, false))),
        Some(ResponseCode::CONTROLLER_INVALID_CLEAN_BROKER_METADATA)
    );
    let Outcome::Applied(Some(g)) = r.apply(&clean(Some(&[3]), false)) else {
        panic!("refused")
    };
    assert_eq!(g.members.keys().copied().collect::<Vec<_>>(), [1, 2]);
    // Ids are not offered again.
    assert_eq!(g.offered_broker_id(), 4);
    // Cleaning the master leaves the group without one, at a new epoch.
    let Outcome::Applied(Some(g)) = r.apply(&clean(Some(&[1]), false)) else {
        panic!("refused")
    };
    assert_eq!((g.master, g.master_epoch), (None, 2));
    assert!(g.sync_state_set.is_empty());
    assert_eq!(r.apply(&clean(None, false)), Outcome::Applied(None));
    assert!(r.groups.is_empty());
    assert_eq!(
        code_of(&r.apply(&clean(None, true))),
        Some(ResponseCode::CONTROLLER_INVALID_CLEAN_BROKER_METADATA)
    );
}

#[test]
fn the_record_round_trips_through_json() {
    let mut r = three_members();
    elect(&mut r, 0, Some(1));
    let text = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
}
